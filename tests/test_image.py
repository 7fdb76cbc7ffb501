"""The production image (compose/Dockerfile), checked statically (no Docker here): its base
images, user and entry point, one pinned CPU torch, and the image's file list, derived from the
Dockerfile's instructions, holding what the services read and nothing of a developer's checkout.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from api.routes.ui import UI_DIR, VENDOR
from pipeline.ops.migrations import migrations_dir
from schemas.export import SCHEMA_DIR
from tests.composeutil import (
    DOCKERFILE,
    ROOT,
    dockerfile_instructions as _dockerfile_instructions,
    interpolate as _interpolate,
)

# -- Dockerfile -------------------------------------------------------------------------------


def test_dockerfile_base_user_and_entrypoint() -> None:
    instructions = _dockerfile_instructions()
    args = {}
    for ins, rest in instructions:
        if ins == "ARG" and "=" in rest:
            key, _, value = rest.partition("=")
            args[key] = value
    froms = [_interpolate(rest.split()[0], args) for ins, rest in instructions if ins == "FROM"]
    assert froms and froms[-1] == "python:3.11-slim", froms
    users = [rest for ins, rest in instructions if ins == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "must run as non-root"
    entrypoints = [rest for ins, rest in instructions if ins == "ENTRYPOINT"]
    assert entrypoints and yaml.safe_load(entrypoints[-1]) == ["brainstream"]
    env_text = " ".join(rest for ins, rest in instructions if ins == "ENV")
    assert re.search(r"\bHF_HUB_OFFLINE=1\b", env_text)


def test_dockerfile_installs_pinned_cpu_torch_with_project_in_one_pip_run() -> None:
    runs = [rest for ins, rest in _dockerfile_instructions() if ins == "RUN"]
    pip_runs = [r for r in runs if "pip install" in r and "torch" in r]
    assert len(pip_runs) == 1, f"torch must be installed in exactly one RUN, found {pip_runs}"
    run = pip_runs[0]
    # torch and the project's minilm extra in the same pip invocation
    commands = [c for c in re.split(r"&&|;", run) if "pip install" in c]
    assert any("torch==2.13.0" in c and ".[minilm]" in c for c in commands), run
    assert "download.pytorch.org/whl/cpu" in DOCKERFILE.read_text(encoding="utf-8")


def test_dockerfile_has_no_unpinned_torch() -> None:
    text = "\n".join(rest for _, rest in _dockerfile_instructions())
    mentions = list(re.finditer(r"\btorch\b", text))
    assert mentions, "torch is not installed at all"
    for match in mentions:
        following = text[match.end():match.end() + 20]
        assert following.startswith("==2.13.0"), (
            f"unpinned or differently pinned torch: {text[match.start():match.end() + 20]!r}"
        )


# -- the image's files ----------------------------------------------------------------------------
#
# The image's file list, derived from the Dockerfile: its COPY instructions (from the build
# context, or `--from=` a stage), WORKDIR, and the one RUN that brings files of its own, `npm ci`
# (package-lock.json's packages). No other RUN reaches the build context (none mounts it:
# checked), so none adds a file of the repository. The parser knows what compose/Dockerfile uses
# and fails on anything else rather than guess. The build context is the working tree, so it holds
# what a developer's checkout holds besides the repository (.gitignore): the walk leaves that out,
# and one stand-in each takes its place, so the result does not depend on this checkout.

LOCAL_NAMES = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".mypy_cache",
               ".ruff_cache", ".hypothesis", ".env"}
LOCAL_STAND_INS = (
    ".venv/bin/python",
    "node_modules/cytoscape/dist/cytoscape.min.js",
    "node_modules/s3rver/package.json",
    ".brainstream/postgres/PG_VERSION",
    ".env",
    "compose/.env",
    "brainstream.egg-info/PKG-INFO",
    "pipeline/__pycache__/settings.cpython-311.pyc",
)
# What may never be in the image: local state, secrets, tests and the Node tools (but the one
# vendor file the explorer serves).
FORBIDDEN_TOP = (".venv", "node_modules", "tests")
DOCKERFILE_INSTRUCTIONS = {"ARG", "FROM", "RUN", "ENV", "WORKDIR", "COPY", "USER", "EXPOSE",
                           "ENTRYPOINT", "CMD"}

# image path -> where the file comes from: "repo:<path in the repository>", or
# "npm:<package-lock key>@<version>[/<path in the package>]". A path that ends in "/" is a folder
# whose files are not listed (a package `npm ci` installs).
Files = dict[str, str]


def _local(name: str) -> bool:
    return name in LOCAL_NAMES or name.startswith(".brainstream") or name.endswith(".egg-info")


def _context() -> Files:
    """The build context (the repository root) as absolute paths: "/api/app.py"."""
    paths = set(LOCAL_STAND_INS)
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not _local(d)]
        rel = Path(folder).relative_to(ROOT)
        paths.update((rel / name).as_posix() for name in names if not _local(name))
    return {"/" + path: f"repo:{path}" for path in paths}


def _expand(files: Files, pattern: str) -> list[str]:
    """The paths a COPY source names: itself, or what its wildcards match (files or folders)."""
    if not any(c in pattern for c in "*?["):
        return [pattern]
    parts = pattern.strip("/").split("/")
    found = set()
    for path in files:
        names = path.strip("/").split("/")
        if len(names) >= len(parts) and all(map(fnmatchcase, names, parts)):
            found.add("/" + "/".join(names[:len(parts)]))
    return sorted(found)


def _copy(files: Files, source: str, dest: str, into: bool) -> Files:
    """What `COPY source dest` adds: a file goes to `dest` (or into it when `into`), a folder's
    contents into `dest`, a path inside a package's folder to the same place as a file."""
    added = {}
    name = dest + "/" + posixpath.basename(source) if into else dest
    folder = source.rstrip("/") + "/"
    for path, origin in files.items():
        if path == source:
            added[name] = origin
        elif path.startswith(folder):
            added[dest.rstrip("/") + path[len(folder) - 1:]] = origin
        elif path.endswith("/") and source.startswith(path):
            added[name] = f"{origin}/{source[len(path):]}"
    return added


def _origin(image: Files, path: str) -> str | None:
    """Where the image's file `path` comes from, also when it lies in a package's folder."""
    if path in image:
        return image[path]
    for folder, origin in image.items():
        if folder.endswith("/") and path.startswith(folder):
            return f"{origin}/{path[len(folder):]}"
    return None


def _npm_ci(files: Files, workdir: str, omit_dev: bool) -> Files:
    """The packages `npm ci` installs in `workdir`: package-lock.json's, each a folder."""
    lock_file = files.get(f"{workdir}/package-lock.json", "")
    assert lock_file.startswith("repo:") and f"{workdir}/package.json" in files, (
        f"npm ci in {workdir} without the repository's package.json and package-lock.json")
    lock = json.loads((ROOT / lock_file[len("repo:"):]).read_text(encoding="utf-8"))
    return {f"{workdir}/{key}/": f"npm:{key}@{entry['version']}"
            for key, entry in lock["packages"].items()
            if key and not (omit_dev and entry.get("dev"))}


def _image_files() -> Files:
    """The files of the Dockerfile's last stage that come from the repository or npm."""
    for ignore in (ROOT / ".dockerignore", DOCKERFILE.with_name("Dockerfile.dockerignore")):
        assert not ignore.exists(), f"teach _image_files the patterns of {ignore}"
    context = _context()
    args: dict[str, str] = {}
    built: list[tuple[Files, str]] = []  # each stage's files and WORKDIR
    names: dict[str, int] = {}  # stage name or index -> its place in `built`
    files: Files = {}
    workdir = "/"
    for instruction, rest in _dockerfile_instructions():
        assert instruction in DOCKERFILE_INSTRUCTIONS, f"teach _image_files {instruction}"
        if instruction == "ARG" and "=" in rest:
            key, _, value = rest.partition("=")
            args.setdefault(key, value)
        elif instruction == "FROM":
            words = rest.split()
            assert len(words) == 1 or (len(words) == 3 and words[1].upper() == "AS"), rest
            parent = names.get(_interpolate(words[0], args))
            files, workdir = ({}, "/") if parent is None else built[parent]
            files = dict(files)
            names[str(len(built))] = len(built)
            if len(words) == 3:
                names[words[2]] = len(built)
            built.append((files, workdir))
        elif instruction == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, rest))
            built[-1] = (files, workdir)
        elif instruction == "RUN":
            assert "--mount" not in rest, "a RUN mounts files: teach _image_files what it reads"
            if re.search(r"\bnpm ci\b", rest):
                files.update(_npm_ci(files, workdir, "--omit=dev" in rest))
        elif instruction == "COPY":
            words = shlex.split(rest)
            flags = {}
            while words[0].startswith("--"):
                key, _, value = words.pop(0)[2:].partition("=")
                flags[key] = value
            assert set(flags) <= {"from", "chown", "chmod", "link"}, f"COPY {rest}"
            assert len(words) >= 2, f"COPY {rest}"
            *sources, dest = words
            if "from" not in flags:
                origin = context
            elif flags["from"] in names:
                origin = built[names[flags["from"]]][0]
            else:
                origin = {}  # another image: no file of the repository
            paths = [p for s in sources
                     for p in _expand(origin, posixpath.normpath(posixpath.join("/", s)))]
            into = dest.endswith("/") or len(paths) > 1
            dest = posixpath.normpath(posixpath.join(workdir, dest))
            for path in paths:
                added = _copy(origin, path, dest, into)
                # a stage's path that no COPY put there was made by a RUN (/opt/venv)
                assert added or "from" in flags, f"COPY {rest}: {path} is not in the build context"
                files.update(added)
    return files


def test_image_carries_what_the_services_read_and_nothing_local() -> None:
    """Every file the services read from the repository is in the image, where the code looks
    for it (relative to its own file: the package is installed editable at the image's copy of
    the repository root): the packages, pyproject.toml, the migrations, the explorer's static
    files and its graph library (from package-lock.json, as api/routes/ui.py serves it), the
    JSON schemas. Nothing of a developer's checkout, the tests or node_modules gets in."""
    image = _image_files()
    roots = [path for path, origin in image.items() if origin == "repo:pyproject.toml"]
    assert len(roots) == 1, f"pyproject.toml in the image: {roots}"
    app = posixpath.dirname(roots[0])

    include = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = [p.rstrip("*") for p in include["tool"]["setuptools"]["packages"]["find"]["include"]]
    read = [migrations_dir(), UI_DIR, SCHEMA_DIR, *(ROOT / p for p in packages)]
    folders = [folder.relative_to(ROOT).as_posix() + "/" for folder in read]
    needed = [origin[len("repo:"):] for origin in _context().values()
              if origin[len("repo:"):] not in LOCAL_STAND_INS]
    needed = [path for path in needed if path.startswith(tuple(folders))]
    assert any(p.startswith("migrations/") for p in needed)
    assert any(p.startswith("api/ui/") for p in needed)
    assert any(p.startswith("schemas/json/") for p in needed)
    vendor = {f"{app}/{file.relative_to(ROOT).as_posix()}" for file, _ in VENDOR.values()}

    for path, origin in image.items():
        assert "/node_modules/" not in path or path in vendor, (
            f"node_modules beyond the explorer's vendor files: {path} ({origin})")
        if origin.startswith("repo:"):
            source = origin[len("repo:"):]
            parts = source.split("/")
            assert parts[0] not in FORBIDDEN_TOP and not parts[0].startswith(".brainstream") \
                and ".env" not in parts, f"{source} is in the image at {path}"

    missing = [path for path in sorted([*needed, "pyproject.toml"])
               if image.get(f"{app}/{path}") != f"repo:{path}"]
    assert not missing, f"not in the image under {app}: {missing}"

    pin = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["dependencies"]
    for file, _ in VENDOR.values():  # the graph library, Swagger UI: from package-lock.json
        package = file.relative_to(ROOT / "node_modules").parts[0]
        inside = file.relative_to(ROOT / "node_modules" / package).as_posix()
        expected = f"npm:node_modules/{package}@{pin[package]}/{inside}"
        path = f"{app}/{file.relative_to(ROOT).as_posix()}"
        assert _origin(image, path) == expected, (
            f"{path} (a file the pages load) must come from package-lock.json by npm ci, "
            f"got {_origin(image, path)!r}")


def test_dockerfile_base_images_pinned() -> None:
    """The Python image by minor version, the Node one (only for npm ci) by major."""
    instructions = _dockerfile_instructions()
    args: dict[str, str] = {}
    for ins, rest in instructions:
        if ins == "ARG" and "=" in rest:
            key, _, value = rest.partition("=")
            args.setdefault(key, value)
    stages: set[str] = set()
    bases = []
    for ins, rest in instructions:
        if ins == "FROM":
            words = rest.split()
            image = _interpolate(words[0], args)
            if image not in stages:
                bases.append(image)
            stages.add(words[-1])
    assert any(re.fullmatch(r"python:3\.11-slim", b) for b in bases), bases
    assert any(re.fullmatch(r"node:\d+-slim", b) for b in bases), bases
    for base in bases:
        assert re.fullmatch(r"(python|node):[\d.]+-slim", base), f"unpinned base image {base}"
