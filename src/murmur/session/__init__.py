"""One capsule session: door, tasks, lifecycle, trace, records, signals."""
