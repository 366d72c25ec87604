"""Requirement (issue 32): the root Dockerfile parses with the official parser; it is
multi-stage with its base images as build arguments; the build stage runs
scripts/release-build.sh, the release build test.sh (so CI) runs too; the runtime stage has
no build tools (nothing is run in it: no RUN, a distroless base with no shell or package
manager), copies only the two binaries from the build stage, declares the data directory as
a volume, carries OCI labels, and runs as a numeric non-root user.

Usage: python dockerfile_check.py REPO  (exit 1 and a list of what failed).
"""

import re
import sys
from pathlib import Path

import dockerfile


def stages(commands):
    """The commands split at each FROM: [(from_command, [commands...]), ...]."""
    out = []
    for c in commands:
        if c.cmd == "FROM":
            out.append((c, []))
        elif out:
            out[-1][1].append(c)
    return out


def main(repo: Path) -> int:
    text = (repo / "Dockerfile").read_text()
    commands = dockerfile.parse_string(text)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    known = {c.upper() for c in dockerfile.all_cmds()}
    unknown = [c.cmd for c in commands if c.cmd not in known]
    check(not unknown, f"every instruction is one the parser knows (unknown: {unknown})")

    args = {}
    for c in commands:
        if c.cmd == "ARG":
            name, _, default = c.value[0].partition("=")
            args.setdefault(name, default)
    parts = stages(commands)
    check(len(parts) >= 2, f"multi-stage ({len(parts)} stages)")
    for frm, _ in parts:
        image = frm.value[0]
        check(image.startswith("${") and image[2:-1] in args, f"FROM {image} takes its base image from a build argument")

    build_from, build = parts[0]
    check(len(build_from.value) == 3 and build_from.value[1].upper() == "AS", "the build stage is named")
    build_name = build_from.value[2] if len(build_from.value) == 3 else None
    runs = [" ".join(c.value) for c in build if c.cmd == "RUN"]
    check(any("scripts/release-build.sh" in r for r in runs), f"the build stage runs scripts/release-build.sh ({runs})")
    test_sh = (repo / "test.sh").read_text()
    check(re.search(r"^\s*bash scripts/release-build\.sh", test_sh, re.M) is not None, "test.sh runs scripts/release-build.sh")
    check((repo / "scripts/release-build.sh").is_file(), "scripts/release-build.sh exists")

    runtime_from, runtime = parts[-1]
    base = args.get(runtime_from.value[0][2:-1], "")
    check("distroless" in base, f"the runtime base ({base}) is distroless: no shell, no package manager")
    check(not [c for c in runtime if c.cmd == "RUN"], "the runtime stage runs nothing (no build tools in it)")
    copies = [c for c in runtime if c.cmd in ("COPY", "ADD")]
    check(copies and all(f"--from={build_name}" in c.flags for c in copies), "the runtime stage copies only from the build stage")
    copied = " ".join(" ".join(c.value) for c in copies)
    check("strom" in copied and "strom-operator" in copied, "it holds strom and strom-operator")
    users = [c.value[0] for c in runtime if c.cmd == "USER"]
    user = users[-1] if users else ""
    uid = user.split(":")[0]
    check(uid.isdigit() and int(uid) != 0, f"it runs as a numeric non-root user (USER {user!r})")
    volumes = " ".join(" ".join(c.value) for c in runtime if c.cmd == "VOLUME")
    check("/var/lib/strom" in volumes, f"the data directory is a volume ({volumes!r})")
    labels = " ".join(" ".join(c.value) for c in runtime if c.cmd == "LABEL")
    for key in ("title", "version", "revision", "source", "licenses"):
        check(f"org.opencontainers.image.{key}" in labels, f"OCI label org.opencontainers.image.{key}")
    entry = [c for c in runtime if c.cmd == "ENTRYPOINT"]
    check(entry and entry[-1].json, "ENTRYPOINT in exec form (there is no shell to run a string)")

    print(f"{len(failures)} failed" if failures else "Dockerfile: every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
