"""Plans: the offline, deterministic workload (spec/plan.md).

Public surface: :func:`load_plan` (read + validate a capsule's plan file),
:class:`PlanWorkload` (the :class:`murmur.workload.Workload` that runs it) and the
:class:`Plan` model.
"""

from __future__ import annotations

from murmur.plan.executor import PlanWorkload as PlanWorkload
from murmur.plan.planfile import load_plan as load_plan
from murmur.plan.planfile import parse_plan as parse_plan
from murmur.plan.steps import Plan as Plan
from murmur.plan.steps import Step as Step

__all__ = ["Plan", "PlanWorkload", "Step", "load_plan", "parse_plan"]
