"""The denied-binary message (murmur.grants, routing.delegate_line): ready routes only, best
first, and the grant line."""

from __future__ import annotations

from murmur.grants import denied_binary, denied_reason, is_binary_name
from murmur.routing.catalog import Catalog, Formation
from murmur.routing.index import answer
from murmur.routing.render import delegate_line
from murmur.shell import ShellRefused, check_allowed
from routing.fixtures import capsule, member


def _formation() -> Catalog:
    lead = capsule("lead", shell=("echo",), net=("localhost",), serves=False)
    f = Formation("roster.yaml", (
        member("lead", lead, "builder", entry=True),
        member("builder", capsule("builder", shell=("cargo",))),
        member("qa", capsule("qa", shell=("cargo", "git"))),   # capable, but no edge: blocked
    ))
    return Catalog(tuple(m.capsule for m in f.members), f)


def test_message_names_the_ready_route_and_never_the_blocked_one() -> None:
    ans = answer(_formation(), can="cargo", asking="lead")
    assert [r.target for r in ans.blocked if r.kind.value == "call-member"] == ["qa"]
    text = denied_binary("cargo", "lead", ("echo",), delegate_line((*ans.ready, *ans.blocked)))
    assert text == (
        "[capsule] `cargo` is not in capsule 'lead''s capabilities.shell.allow, so the runtime "
        "refused to run it.\n"
        "This is decided when the capsule starts — there is no approval prompt for it.\n"
        'DELEGATE it instead of asking the user: call-member(member="builder", task=<this exact '
        'command, with absolute paths>). Best first: "builder".\n'
        "To grant it here instead, add `cargo` to capabilities.shell.allow in lead's murmur.yaml "
        "(`capabilities.shell.allow: [echo, cargo]`), reinstall, and restart the session."
    )
    assert "qa" not in text


def test_with_no_ready_route_only_the_grant_line() -> None:
    text = denied_binary("cargo", "solo", (), delegate_line(()))
    assert "DELEGATE" not in text
    assert "No capsule or member that 'solo' may call holds `cargo`." in text
    assert text.endswith("(`capabilities.shell.allow: [cargo]`), reinstall, and restart the session.")


def test_a_kernel_refusal_reads_as_seed_003s_sandbox_message() -> None:
    """An exec the sandbox refused (scoped, sealed): seed 003's ``[sandbox]`` sentence, the
    ready route, then the grant line."""
    route = delegate_line(answer(_formation(), can="cargo", asking="lead").ready)
    assert denied_binary("cargo", "lead", ("echo",), route, kernel=True) == (
        "[sandbox] `cargo` is not in capsule 'lead''s capabilities.shell.allow, so the kernel "
        "refused to exec it.\n"
        "This is decided when the capsule starts — there is no approval prompt for it.\n"
        'DELEGATE it instead of asking the user: call-member(member="builder", task=<this exact '
        'command, with absolute paths>). Best first: "builder".\n'
        "To grant it here instead, add `cargo` to capabilities.shell.allow in lead's murmur.yaml "
        "(`capabilities.shell.allow: [echo, cargo]`), reinstall, and restart the session."
    )


def test_indirect_route_names_what_it_reaches() -> None:
    lead = capsule("lead", serves=False)
    f = Formation("roster.yaml", (
        member("lead", lead, "worker", entry=True),
        member("worker", capsule("worker", shell=("echo",)), "builder"),
        member("builder", capsule("builder", shell=("cargo",))),
    ))
    ans = answer(Catalog(tuple(m.capsule for m in f.members), f), can="cargo", asking="lead")
    text = denied_binary("cargo", "lead", (), delegate_line(ans.ready))
    assert 'Best first: "worker" (via builder).' in text


def test_shell_refusal_uses_the_routing_sentence() -> None:
    try:
        check_allowed("cargo", ("echo",))
    except ShellRefused as exc:
        assert exc.reason == denied_reason("cargo")
        assert "there is no approval prompt for it" in exc.reason
        assert exc.grant == "capabilities.shell.allow: [echo, cargo]"
    else:  # pragma: no cover
        raise AssertionError("cargo was allowed")


def test_binary_names() -> None:
    assert is_binary_name("cargo") and is_binary_name("cargo-nextest")
    assert not is_binary_name("bin/cargo") and not is_binary_name("") and not is_binary_name("a b")
