#!/usr/bin/env python3
"""The repository explains itself: no tracked file may refer to a path outside it.

Fails (exit 1), printing `file:line: what: text` for each finding, when a text file tracked by git
  - names one of the design notes that used to live beside the repository (their file names are
    assembled from pieces below, so that this file does not name them itself),
  - points into a sibling checkout (a `shared` directory next to the repository) or into an
    absolute workspace path,
  - holds a relative path that climbs above the repository root from the file's own directory:
    a Markdown link target, or any path-like token of code or prose (`a/../../b`, `$dir/../..`),
  - is a symbolic link whose target lies outside the repository.
Binary files (a NUL byte in their first 8 KiB, as safetensors and .npy fixtures under tests/data/
have) are skipped. Findings under kernels/ and tests/kernels/ are listed like all others.

  tests/tools/repo_paths_test.py [REPO_ROOT] [--untracked]

REPO_ROOT defaults to two levels above this script. --untracked also checks the files git does
not track yet but does not ignore (new files before they are added). Exit status: 0 clean, 1
findings, 2 when git cannot list the files. Standard library only.
"""
import os
import posixpath
import re
import subprocess
import sys

# Names that must not appear as file names: the design notes kept outside the repository. Built
# from pieces so that this test does not find itself.
_NOTE_STEMS = ("DES" + "IGN", "K" + "3", "STY" + "LE")
NOTE_NAME = re.compile(r"(?<![A-Za-z0-9_.\-])(?:%s)\.md(?![A-Za-z0-9_])" % "|".join(_NOTE_STEMS))
# A sibling checkout next to the repository, and the workspace's absolute root.
SIBLING = re.compile(re.escape("." + "./") + "sha" + "red" + r"(?![A-Za-z0-9_])")
WORKSPACE = re.compile(re.escape("/" + "work" + "/"))
# Markdown link targets: ](target) or ](<target>).
MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
# Characters of a path-like token; anything else separates tokens.
PATH_TOKEN = re.compile(r"[A-Za-z0-9_.\-/$@{}+~]+")
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
PARENT = "." + "."
# Substrings without which a text holds no finding (a quick filter before the line-by-line pass).
SIBLING_DIR = "sha" + "red" + "/"
TRIGGERS = (PARENT, "." + "md", "/" + "work" + "/", SIBLING_DIR)


def repo_files(root, untracked):
    cmd = ["git", "-C", root, "ls-files", "-z"]
    if untracked:
        cmd += ["--cached", "--others", "--exclude-standard"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})


def climbs_above_root(path, file_dir_depth):
    """Whether a path token, read from a file `file_dir_depth` directories below the root, leaves
    the repository. Leading variable components ($dir, ${X}, @VAR@) stand for the file's own
    directory; absolute paths other than `/..` chains (a variable joined to a relative path) are
    not relative paths and are left alone."""
    parts = path.split("/")
    if path.startswith("/"):
        first = next((p for p in parts if p), "")
        if first != PARENT:
            return False
    depth = file_dir_depth
    leading = True
    for p in parts:
        if p in ("", "."):
            continue
        if leading and any(c in p for c in "$@{}"):
            continue  # a variable standing for a directory: taken as the file's own
        leading = False
        if p == PARENT:
            depth -= 1
            if depth < 0:
                return True
        else:
            depth += 1
    return False


def link_leaves_root(target, file_dir):
    if URL_SCHEME.match(target) or target.startswith(("#", "/", "mailto:")):
        return False
    target = target.split("#", 1)[0].split("?", 1)[0]
    if not target:
        return False
    resolved = posixpath.normpath(posixpath.join(file_dir, target))
    return resolved == PARENT or resolved.startswith(PARENT + "/")


def line_findings(line, file_dir, file_dir_depth, has_sibling_dir):
    found = []
    for m in NOTE_NAME.finditer(line):
        found.append(("design note outside the repository", m.group(0)))
    for m in SIBLING.finditer(line):
        found.append(("path into a sibling checkout", m.group(0)))
    for m in WORKSPACE.finditer(line):
        found.append(("absolute workspace path", m.group(0)))
    for m in MD_LINK.finditer(line):
        if link_leaves_root(m.group(1), file_dir):
            found.append(("link target above the repository root", m.group(1)))
    for m in PATH_TOKEN.finditer(line):
        token = m.group(0)
        if "/" not in token:
            continue
        if PARENT in token.split("/") and climbs_above_root(token, file_dir_depth):
            if not any(token in text for _, text in found):
                found.append(("path above the repository root", token))
        elif not has_sibling_dir and token.startswith(SIBLING_DIR):
            # A path starting at a `shared` directory the repository does not have.
            found.append(("path into a sibling checkout", token))
    return found


def check_file(root, rel, has_sibling_dir):
    """Findings of one file: [(line number, what, text, line)]."""
    path = os.path.join(root, rel)
    if os.path.islink(path):
        target = os.path.realpath(path)
        real_root = os.path.realpath(root)
        if os.path.commonpath([target, real_root]) != real_root:
            return [(0, "symbolic link out of the repository", os.readlink(path), "")]
        return []
    if not os.path.isfile(path):
        return []  # deleted in the working tree, or a submodule
    with open(path, "rb") as f:
        head = f.read(8192)
        if b"\0" in head:
            return []  # binary
        data = head + f.read()
    text = data.decode("utf-8", "replace")
    if not any(t in text for t in TRIGGERS):
        return []
    file_dir = posixpath.dirname(rel)
    depth = len(file_dir.split("/")) if file_dir else 0
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not any(t in line for t in TRIGGERS):
            continue
        for what, snippet in line_findings(line, file_dir, depth, has_sibling_dir):
            out.append((number, what, snippet, line.strip()))
    return out


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    untracked = "--untracked" in argv[1:]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    try:
        files = repo_files(root, untracked)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"repo_paths_test: cannot list the files of {root} with git: {e}", file=sys.stderr)
        return 2
    has_sibling_dir = any(f.startswith(SIBLING_DIR) for f in files)
    findings = []
    for rel in files:
        for number, what, snippet, line in check_file(root, rel, has_sibling_dir):
            findings.append((rel, number, what, snippet, line))
    if not findings:
        print(f"repo_paths_test: {len(files)} files refer only to paths inside the repository")
        return 0
    for rel, number, what, snippet, line in findings:
        shown = line if len(line) <= 160 else line[:157] + "..."
        print(f"{rel}:{number}: {what}: {snippet!r}\n    {shown}")
    by_file = sorted({f[0] for f in findings})
    print(f"\nrepo_paths_test: FAILED: {len(findings)} references to paths outside the repository "
          f"in {len(by_file)} files: {', '.join(by_file)}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
