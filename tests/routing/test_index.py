"""Table tests of the routing index: holders, route states, blocked reasons, the ranking key."""

from __future__ import annotations

import pytest

from murmur.routing.catalog import Capsule, Catalog, Formation, RankKey, RouteKind, State
from murmur.routing.index import answer, holds, rank_key, resolve_asker, routes_for
from routing.fixtures import capsule, member

LEAD = capsule("lead", net=("localhost",), serves=False)
BUILDER = capsule("builder", shell=("echo", "cargo"), scope="repos/app")
QA = capsule("qa", shell=("echo", "cargo", "cargo-nextest", "rustc", "git"), net=("crates.io", "github.com"))
WORKER = capsule("worker", shell=("echo",))
RUSTSMITH = capsule("rustsmith", shell=("cargo", "git"))


def formation(*members: object, all_: bool = False) -> Formation:
    return Formation("roster.yaml", tuple(members), all_)  # type: ignore[arg-type]


def catalog(f: Formation | None, *extra: Capsule, roost: tuple[str, ...] | None = None) -> Catalog:
    caps = [m.capsule for m in (f.members if f else ())] + list(extra)
    return Catalog(tuple(caps), f, roost)


BASIC = formation(
    member("lead", LEAD, "worker", "builder", entry=True),
    member("worker", WORKER, "builder"),
    member("builder", BUILDER),
    member("qa", QA),
)


def routes(cat: Catalog, asking: str, binary: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, str]]]:
    ans = answer(cat, can=binary, asking=asking)
    ready = [(r.kind.value, r.target, ",".join(r.via)) for r in ans.ready]
    blocked = [(r.kind.value, r.target, r.reason or "", r.authorize or "") for r in ans.blocked]
    return ready, blocked


class TestHolders:
    def test_holders_are_the_capsules_whose_shell_allow_lists_the_binary(self) -> None:
        ans = answer(catalog(BASIC, RUSTSMITH), can="cargo")
        assert [h.label for h in ans.holders] == ["builder", "qa", "rustsmith"]
        assert [h.member is not None for h in ans.holders] == [True, True, False]

    def test_no_query_lists_everything(self) -> None:
        ans = answer(catalog(BASIC, RUSTSMITH))
        assert [h.label for h in ans.holders] == ["lead", "worker", "builder", "qa", "rustsmith"]
        assert ans.asking is None and not ans.ready

    def test_a_label_never_grants_a_binary(self) -> None:
        liar = capsule("liar", description="I can run cargo builds", skills=("cargo",))
        ans = answer(catalog(None, liar), can="cargo")
        assert ans.holders == ()

    @pytest.mark.parametrize(("label", "names"), [
        ("rust", ["smith"]),          # a skill artifact's name
        ("tests", ["qa2"]),           # a description word
        ("gpt-x", ["modeled"]),       # the model
        ("nothing", []),
    ])
    def test_skill_matches_soft_labels(self, label: str, names: list[str]) -> None:
        cat = Catalog((capsule("smith", skills=("rust-review",)),
                       capsule("qa2", description="Runs the tests."),
                       capsule("modeled", agent=True, budget=10, model="gpt-x")))
        assert [h.label for h in answer(cat, skill=label).holders] == names


class TestMemberRoutes:
    def test_every_state_and_reason_in_one_formation(self) -> None:
        ready, blocked = routes(catalog(BASIC, RUSTSMITH), "lead", "cargo")
        assert ready == [("call-member", "builder", "builder"), ("call-member", "worker", "builder")]
        assert blocked[0][:2] == ("call-member", "qa")
        assert blocked[0][2] == "roster.yaml has no reachability edge from 'lead' to 'qa'"
        assert blocked[0][3] == ("add `- {from: lead, to: [qa]}` to reachability in roster.yaml, "
                                 "and relaunch the formation")

    def test_indirect_grant_appears_through_the_callee(self) -> None:
        """worker lacks cargo but reaches builder: a ready route via builder."""
        ans = answer(catalog(BASIC), can="cargo", asking="lead")
        worker = next(r for r in ans.ready if r.target == "worker")
        assert worker.via == ("builder",)
        # seen from worker itself, builder is direct, and lead (entry) is never a target
        ready, blocked = routes(catalog(BASIC), "worker", "cargo")
        assert ready == [("call-member", "builder", "builder")]
        assert [b[1] for b in blocked if b[0] == "call-member"] == ["qa"]

    def test_indirect_grant_never_passes_back_through_the_asker(self) -> None:
        f = formation(member("lead", LEAD, "worker", entry=True), member("worker", WORKER, "lead"))
        assert routes(catalog(f), "lead", "cargo") == ([], [])

    def test_entry_member_is_blocked_with_no_edit(self) -> None:
        f = formation(member("lead", capsule("lead", shell=("cargo",)), entry=True),
                      member("worker", WORKER))
        _, blocked = routes(catalog(f), "worker", "cargo")
        assert blocked[0][1] == "lead"
        assert blocked[0][2] == "'lead' is the entry member, and no member may call the entry member"
        assert blocked[0][3].startswith("none:")

    def test_target_not_serving_peers(self) -> None:
        f = formation(member("lead", LEAD, entry=True),
                      member("builder", capsule("builder", shell=("cargo",), serves=False)))
        _, blocked = routes(catalog(f), "lead", "cargo")
        assert blocked[0][2] == "'builder' does not serve peers (exports.peer_tasks.accept is not true)"
        assert "`exports.peer_tasks.accept: true` in builder's murmur.yaml" in blocked[0][3]

    def test_reachability_all_with_a_caller_that_serves_nobody(self) -> None:
        f = formation(member("lead", LEAD, entry=True), member("builder", BUILDER), all_=True)
        _, blocked = routes(catalog(f), "lead", "cargo")
        assert blocked[0][2] == "'lead' does not serve peers, so `reachability: all` gives it no edges"
        assert "replace `reachability: all`" in blocked[0][3]

    @pytest.mark.parametrize(("target", "ready"), [
        (capsule("helper", agent=True, shell=("cargo",)), False),               # no budget_tokens
        (capsule("helper", agent=True, shell=("cargo",), budget=50_000), True),
        (capsule("helper", shell=("cargo",)), True),                            # a plan needs none
    ])
    def test_an_agent_routes_to_an_agent_only_under_a_spending_ceiling(self, target: Capsule, ready: bool) -> None:
        agent_lead = capsule("lead", agent=True, budget=1000, serves=False)
        f = formation(member("lead", agent_lead, "helper", entry=True), member("helper", target))
        r, b = routes(catalog(f), "lead", "cargo")
        b = [x for x in b if x[0] == "call-member"]
        assert bool(r) is ready and bool(b) is not ready
        if not ready:
            assert "inference.budget_tokens is not set" in b[0][2]
            assert b[0][3].startswith("set `inference.budget_tokens: <input + output tokens per task>` in helper's")

    def test_a_plan_asker_needs_no_budget_on_its_target(self) -> None:
        f = formation(member("lead", LEAD, "helper", entry=True),
                      member("helper", capsule("helper", agent=True, shell=("cargo",))))
        assert routes(catalog(f), "lead", "cargo")[0] == [("call-member", "helper", "helper")]


class TestDelegationRoutes:
    def test_a_child_holding_a_binary_its_parent_lacks_is_always_blocked(self) -> None:
        parent = capsule("parent", spawn=("rustsmith",))
        _, blocked = routes(catalog(None, parent, RUSTSMITH), "parent", "cargo")
        assert blocked == [("delegate-task", "rustsmith",
                            "the spawn envelope refuses it: the child holds `cargo`, which its parent does not",
                            "none: the spawn envelope refuses it: the child holds `cargo`, which its parent "
                            "does not; a child never holds more than its parent")]

    def test_a_narrower_child_is_a_ready_route_for_a_binary_the_parent_holds(self) -> None:
        parent = capsule("parent", shell=("cargo", "git", "make"), net=("crates.io",), spawn=("narrow", "wide"))
        narrow = capsule("narrow", shell=("cargo",), scope="src")
        wide = capsule("wide", shell=("cargo", "git"), net=("crates.io",))
        ans = answer(catalog(None, parent, narrow, wide), can="cargo", asking="parent")
        assert [r.target for r in ans.ready] == ["narrow", "wide"]
        assert all(r.kind is RouteKind.DELEGATE for r in ans.ready)
        assert ans.holds_itself

    def test_not_in_spawn_allow_names_the_grant_line(self) -> None:
        parent = capsule("parent", shell=("cargo", "git"), spawn=("other",))
        _, blocked = routes(catalog(None, parent, RUSTSMITH), "parent", "cargo")
        assert blocked[0][2] == "'rustsmith' is not in parent's capabilities.spawn.allow"
        assert blocked[0][3] == ("add `rustsmith` to capabilities.spawn.allow in parent's murmur.yaml "
                                 "(`capabilities.spawn.allow: [other, rustsmith]`), reinstall, and restart the session")

    def test_other_envelope_axes_name_the_key(self) -> None:
        parent = capsule("parent", shell=("cargo",), spawn=("netty",))
        netty = capsule("netty", shell=("cargo",), net=("example.com",))
        _, blocked = routes(catalog(None, parent, netty), "parent", "cargo")
        assert blocked[0][2] == ("the spawn envelope refuses it: the child holds `example.com` under "
                                 "capabilities.network.allow, which its parent does not")

    def test_roost_spawn_allow_when_known(self) -> None:
        parent = capsule("parent", shell=("cargo", "git"), spawn=("rustsmith",))
        cat = catalog(None, parent, RUSTSMITH, roost=("other",))
        _, blocked = routes(cat, "parent", "cargo")
        assert blocked[0][2] == "mur-roost's --spawn-allow does not list 'rustsmith'"
        assert blocked[0][3] == "restart mur-roost with `--spawn-allow other --spawn-allow rustsmith`"
        assert routes(catalog(None, parent, RUSTSMITH, roost=("rustsmith",)), "parent", "cargo")[0] == [
            ("delegate-task", "rustsmith", "rustsmith")]


class TestRanking:
    def test_key_fields_in_order(self) -> None:
        cases = [
            capsule("a", shell=("cargo", "git", "make")),                    # 2 other binaries
            capsule("b", shell=("cargo", "git"), net=("x", "y")),            # 1 other, wide scope
            capsule("c", shell=("cargo", "git"), scope="src", net=("x", "y")),  # 1 other, narrower
            capsule("d", shell=("cargo", "git"), scope="src", net=("x",), spawn=("z",)),
            capsule("e", shell=("cargo", "git"), scope="src", net=("x",)),   # no spawn beats d
            capsule("f", shell=("cargo",), scope="src/x", exec_=True),       # fewest binaries first
            capsule("g", shell=("cargo",), scope="src/x"),                   # no workdir_exec beats f
        ]
        keys = sorted((rank_key(c, name=c.name, binary="cargo"), c.name) for c in cases)
        assert [n for _, n in keys] == ["g", "f", "e", "d", "c", "b", "a"]

    def test_key_text(self) -> None:
        key = rank_key(BUILDER, name="builder", binary="cargo")
        assert key == RankKey(1, -2, False, 0, False, "builder")
        assert key.text() == "1 other binary, scope depth 2, 0 hosts, no spawn"

    def test_ready_routes_are_ordered_by_the_key_then_name(self) -> None:
        f = formation(
            member("lead", LEAD, "zeta", "alpha", "qa", entry=True),
            member("zeta", capsule("zeta", shell=("cargo",))),
            member("alpha", capsule("alpha", shell=("cargo",))),
            member("qa", QA),
        )
        ready, _ = routes(catalog(f), "lead", "cargo")
        assert [t for _, t, _ in ready] == ["alpha", "zeta", "qa"]


class TestAsker:
    def test_member_name_then_capsule_name(self) -> None:
        cat = catalog(BASIC, RUSTSMITH)
        a = resolve_asker(cat, "lead")
        assert a is not None and a.member is not None and a.member.name == "lead"
        b = resolve_asker(cat, "rustsmith")
        assert b is not None and b.member is None
        assert resolve_asker(cat, "nobody") is None

    def test_unknown_asker_raises(self) -> None:
        with pytest.raises(KeyError):
            answer(catalog(BASIC), can="cargo", asking="nobody")

    def test_roster_default_asker_is_the_entry_member(self) -> None:
        assert answer(catalog(BASIC), can="cargo").asking == "lead"

    def test_running_state_is_carried(self) -> None:
        running = Capsule("solo", "0.1.0", BUILDER.manifest, State.RUNNING, sessions=("ses_1",))
        ready, blocked = routes_for(Catalog((running,)), resolve_asker(Catalog((running,)), "solo"),  # type: ignore[arg-type]
                                    holds("cargo"), binary="cargo")
        assert ready == () and blocked == ()
        assert answer(Catalog((running,)), can="cargo").holders[0].capsule.state is State.RUNNING


class TestIndirect:
    """Issue 30 item 12: under advisory a shell/interpreter grant is a grant of everything."""

    def test_advisory_shell_grant_is_listed_indirect_with_why_and_exact(self) -> None:
        shelly = capsule("shelly", shell=("echo", "sh"))
        pyish = capsule("pyish", shell=("python3.11",))
        ans = answer(catalog(None, shelly, pyish, WORKER), can="ls")
        assert ans.holders == ()
        assert [(i.holder.label, i.via) for i in ans.indirect] == [("pyish", ("python3.11",)), ("shelly", ("sh",))]
        assert "advisory containment" in ans.indirect[1].why and "`sh -c 'ls …'`" in ans.indirect[1].why
        assert ans.indirect[1].exact.startswith("set `capabilities.containment: scoped` in shelly's murmur.yaml")

    def test_scoped_or_sealed_lists_explicit_holders_only(self) -> None:
        import attrs

        from murmur.manifest.model import Containment

        for klass in (Containment.SCOPED, Containment.SEALED):
            shelly = capsule("shelly", shell=("echo", "sh"))
            m = shelly.manifest
            sealed = attrs.evolve(shelly, manifest=attrs.evolve(
                m, capabilities=attrs.evolve(m.capabilities, containment=klass)))
            assert answer(catalog(None, sealed), can="ls").indirect == ()
        # negative control: the same capsule without the floor is listed
        assert len(answer(catalog(None, capsule("shelly", shell=("echo", "sh"))), can="ls").indirect) == 1

    def test_an_explicit_holder_is_not_indirect(self) -> None:
        both = capsule("both", shell=("sh", "ls"))
        ans = answer(catalog(None, both), can="ls")
        assert [h.label for h in ans.holders] == ["both"] and ans.indirect == ()


class TestCodexNote:
    """Issue 30 item 10: a Codex capsule's shell grant is held by its sandbox, not per program."""

    def _codex(self, klass: object = None) -> Capsule:
        import attrs

        c = capsule("cx", shell=("git",), agent=True, budget=100)
        m = c.manifest
        assert m.inference is not None
        m = attrs.evolve(m, inference=attrs.evolve(m.inference, protocol="codex"))
        if klass is not None:
            m = attrs.evolve(m, capabilities=attrs.evolve(m.capabilities, containment=klass))
        return attrs.evolve(c, manifest=m)

    def test_who_says_codex_shell_grant_is_enforced_by_the_sandbox(self) -> None:
        from murmur.manifest.model import Containment
        from murmur.routing.render import to_text

        text = to_text(answer(catalog(None, self._codex(Containment.SCOPED)), can="git"), can="git", skill=None)
        assert "enforced by the scoped sandbox" in text and "not per program" in text, text
        text = to_text(answer(catalog(None, self._codex()), can="git"), can="git", skill=None)
        assert "under advisory containment its shell.allow is not enforced" in text, text
        # negative control: a claude-code agent gets no such line
        plain = capsule("cc", shell=("git",), agent=True, budget=100)
        assert "Codex" not in to_text(answer(catalog(None, plain), can="git"), can="git", skill=None)


class TestClassLine:
    """A row of a capsule declaring scoped or sealed says what its class holds it to."""

    def _at(self, klass: object) -> Capsule:
        import attrs

        c = capsule("fence", shell=("sh", "cat"))
        return attrs.evolve(c, manifest=attrs.evolve(
            c.manifest, capabilities=attrs.evolve(c.manifest.capabilities, containment=klass)))

    def test_sealed_and_scoped_rows_say_their_class(self) -> None:
        from murmur.manifest.model import Containment
        from murmur.routing.render import to_text

        text = to_text(answer(catalog(None, self._at(Containment.SEALED)), can="cat"), can="cat", skill=None)
        assert ("      class  sealed: the kernel holds exec, writes and net to these lines, in a root of "
                "its own (the workdir, the runtime trees, a fixed /etc and /dev)") in text, text
        text = to_text(answer(catalog(None, self._at(Containment.SCOPED)), can="cat"), can="cat", skill=None)
        assert "      class  scoped: the kernel holds exec, writes and net to these lines\n" in text, text
        # negative control: a capsule without a floor keeps today's row
        assert "class" not in to_text(answer(catalog(None, capsule("fence", shell=("sh", "cat"))), can="cat"),
                                      can="cat", skill=None)
