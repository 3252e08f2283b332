"""The README, docs/ and the READMEs of benchmarks/ and conformance/ hold what a reader follows:
every relative link (a page or a picture, and a heading it names with ``#``) leads somewhere, and
every ``commitlab ...`` command they show parses with the command line's own parser (argparse,
nothing run). Placeholders such as ``DIR``, ``N`` or ``TRACE.json`` stand for a value of the right
kind; a synopsis' ``[...]``, ``a|b`` and ``...`` read as one of the ways to write the command."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.cli.command import build_parser
from runtime.cli.options import protocol_names
from runtime.core.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


def documents(root: Path = ROOT) -> list[Path]:
    """The README first, then docs/ and the README of each folder that has one."""
    folders = [root / name / "README.md" for name in ("benchmarks", "conformance")]
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), *(p for p in folders if p.exists())]


# -- reading markdown ------------------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)


@dataclass
class Markdown:
    """A document split into its fenced code blocks and its prose (with each line's number)."""

    path: Path
    code: list[tuple[int, str]]  # (first line, the block's text)
    prose: list[tuple[int, str]]  # (first line, a paragraph)

    @classmethod
    def read(cls, path: Path) -> Markdown:
        code: list[tuple[int, str]] = []
        prose: list[tuple[int, str]] = []
        block: list[str] | None = None
        para: list[str] = []
        start = 0
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if FENCE.match(line.strip()):
                if block is None:
                    if para:
                        prose.append((start, "\n".join(para)))
                    para, block, start = [], [], n + 1
                else:
                    code.append((start, "\n".join(block)))
                    block = None
            elif block is not None:
                block.append(line)
            elif line.strip():
                if not para:
                    start = n
                para.append(line)
            elif para:
                prose.append((start, "\n".join(para)))
                para = []
        if para:
            prose.append((start, "\n".join(para)))
        return cls(path, code, prose)

    def headings(self) -> set[str]:
        """The anchors GitHub gives this document's headings."""
        seen: dict[str, int] = {}
        anchors = set()
        for _, para in self.prose:
            for line in para.splitlines():
                m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
                if not m:
                    continue
                slug = github_anchor(m.group(1))
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                anchors.add(slug if n == 0 else f"{slug}-{n}")
        return anchors

    def links(self) -> list[tuple[int, str]]:
        """Every link and image target of the prose, outside inline code."""
        out = []
        for line_no, para in self.prose:
            text = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), para)
            for m in LINK.finditer(text):
                out.append((line_no + text[: m.start()].count("\n"), m.group(1)))
        return out

    def command_texts(self) -> list[tuple[int, str]]:
        """Where a command may be shown: each line of a code block (continuation lines joined) and
        each inline code span (a table cell's ``\\|`` read as ``|``)."""
        out = []
        for line_no, block in self.code:
            joined = re.sub(r"\\\n\s*", " ", block)
            out += [(line_no, line) for line in joined.splitlines()]
        for line_no, para in self.prose:
            for m in INLINE_CODE.finditer(para):
                text = " ".join(m.group(2).replace("\\|", "|").split())
                out.append((line_no + para[: m.start()].count("\n"), text))
        return out


def github_anchor(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


# -- links -----------------------------------------------------------------------------------------


def broken_links(docs: list[Path]) -> list[str]:
    root = docs[0].parent  # the README's folder
    problems = []
    for path in docs:
        doc = Markdown.read(path)
        for line_no, target in doc.links():
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{line_no}"
            if not dest.exists():
                problems.append(f"{where}: {target}: no file {dest.name}")
            elif anchor and dest.suffix == ".md" and anchor not in Markdown.read(dest).headings():
                problems.append(f"{where}: {target}: no heading #{anchor} in {dest.name}")
    return problems


# -- commands --------------------------------------------------------------------------------------

COMMAND = re.compile(r"(?:^|(?<=[\s/]))(?:commitlab|python -m runtime)\s+(.*)$")
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(?:[./:][\w.,:/-]*)?")
SAMPLES = ("1", "0.5", "1,2", "x")


def commands_named(docs: list[Path]) -> list[tuple[str, list[str]]]:
    """(where, the command's arguments) of every ``commitlab ...`` the documents show."""
    out = []
    for path in docs:
        for line_no, text in Markdown.read(path).command_texts():
            m = COMMAND.search(text)
            if m:
                out.append((f"{path.name}:{line_no}", m.group(1)))
    return [(where, args) for where, rest in out if (args := synopsis_args(rest)) is not None]


def synopsis_args(rest: str) -> list[str] | None:
    """The arguments a synopsis stands for: brackets dropped, the first of ``a|b`` and of
    ``[x | y]``, a value for ``--opt ...``; ``None`` for a mention of the command line as a whole
    (``commitlab ...``, ``commitlab COMMAND``)."""
    rest = re.split(r"\s(?:#|&&|;|>)\s?", rest, maxsplit=1)[0]  # a comment, the next shell command
    try:
        tokens = shlex.split(rest)
    except ValueError:
        tokens = rest.split()
    args: list[str] = []
    depth = skipping = 0
    for token in tokens:
        opens, closes = len(token) - len(token.lstrip("[")), len(token) - len(token.rstrip("]"))
        token = token.strip("[]")
        depth += opens
        if token == "|" and depth == 0:
            break  # a shell pipe
        if token == "|":
            skipping = depth  # the other ways of this group
        elif not skipping and token:
            if token.startswith("..."):
                if args and args[-1].startswith("-"):
                    args.append("X")  # "--key ...": some value
            else:
                args.append(token.split("|")[0] if "|" in token and not token.startswith("'") else token)
        depth -= closes
        if skipping and depth < skipping:
            skipping = 0
    if not args or args[0].startswith("...") or PLACEHOLDER.fullmatch(args[0]):
        return None
    return args


def _sample(action: argparse.Action, value: str) -> str:
    """A value of the kind a placeholder stands for."""
    if action.choices is not None:
        return value if value in action.choices else next(iter(action.choices))
    convert = action.type if callable(action.type) else str
    default = [action.default] if isinstance(action.default, str) else []  # valid by construction
    for candidate in (*default, value, *SAMPLES, protocol_names()[0]):
        try:
            convert(candidate)
        except (ValueError, TypeError, argparse.ArgumentTypeError, UserError):
            continue
        return candidate
    return value


def with_samples(args: list[str], commands: dict[str, argparse.ArgumentParser]) -> list[str]:
    """``args`` with each placeholder value replaced by a value its option accepts."""
    sub = commands.get(args[0])
    if sub is None:
        return args
    out = [args[0]]
    expects: argparse.Action | None = None
    for token in args[1:]:
        if expects is not None and not token.startswith("-"):
            out.append(_sample(expects, token) if PLACEHOLDER.fullmatch(token) else token)
            expects = None
            continue
        expects = None
        name = token.split("=", 1)[0]
        action = sub._option_string_actions.get(name) if token.startswith("-") else None
        if action is not None and action.nargs != 0 and "=" not in token:
            expects = action
        out.append(token)
    return out


def parse_error(args: list[str]) -> str | None:
    """argparse's complaint about ``args``, or None when they parse (``--help`` included)."""
    parser, commands = build_parser()
    if len(args) == 1:  # the command named, as in "`commitlab check` searches ...": it must exist
        return None if args[0] in commands else f"no command {args[0]!r}"
    if "--config" in args and args[0] in commands:  # the file would give the required options
        for action in commands[args[0]]._actions:
            action.required = False
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(with_samples(args, commands))
        except UserError as exc:  # an option's own check (a protocol that does not load, ...)
            return str(exc)
        except SystemExit as exit:
            if exit.code:
                return err.getvalue().strip().splitlines()[-1]
    return None


# -- the tests -------------------------------------------------------------------------------------


def test_every_relative_link_of_the_readme_and_docs_leads_somewhere():
    assert broken_links(documents()) == []


@pytest.fixture
def in_a_notebook_folder(tmp_path, monkeypatch):
    """The README's "copy docs/protocol_template.py ... and name the file wherever a protocol is
    asked for", done: the commands that name ``my_protocol.py`` run beside it."""
    folder = tmp_path / "notebook"
    folder.mkdir()
    (folder / "my_protocol.py").write_text((ROOT / "docs" / "protocol_template.py").read_text())
    monkeypatch.chdir(folder)


@pytest.mark.usefixtures("in_a_notebook_folder")
def test_every_command_the_readme_and_docs_show_parses():
    named = commands_named(documents())
    assert len(named) > 50  # the documents show many; a reader that finds none reads nothing
    problems = [f"{where}: commitlab {' '.join(args)}: {err}" for where, args in named if (err := parse_error(args))]
    assert problems == []


def test_the_readme_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "scripts/setup.sh && .venv/bin/commitlab run\n" in text
    assert "scripts/setup.sh && .venv/bin/python -m pytest -q\n" in text
    assert len(text.splitlines()) <= 350


def test_a_broken_link_anchor_or_command_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "A.md").write_text("# A page\n\n## Its part\n")
    (tmp_path / "README.md").write_text(
        "# Lab\n\n[ok](docs/A.md#its-part) [gone](docs/MISSING.md) ![pic](docs/none.png)\n"
        "[no such part](docs/A.md#elsewhere) `[not a link](docs/MISSING.md)`\n\n"
        "```bash\ncommitlab run --writers N --out DIR   # fine\ncommitlab run --no-such-flag\n```\n\n"
        "`commitlab explore --scenario NAME --seeds N` and `commitlab nosuchcommand` and "
        "`commitlab run --protocol no-such-protocol --source spark|generator` and `commitlab ...`\n"
    )
    docs = documents(tmp_path)
    assert broken_links(docs) == [
        "README.md:3: docs/MISSING.md: no file MISSING.md",
        "README.md:3: docs/none.png: no file none.png",
        "README.md:4: docs/A.md#elsewhere: no heading #elsewhere in A.md",
    ]
    named = commands_named(docs)
    assert [args for _, args in named] == [
        ["run", "--writers", "N", "--out", "DIR"],
        ["run", "--no-such-flag"],
        ["explore", "--scenario", "NAME", "--seeds", "N"],
        ["nosuchcommand"],
        ["run", "--protocol", "no-such-protocol", "--source", "spark"],
    ]
    verdicts = [parse_error(args) is None for _, args in named]
    assert verdicts[:4] == [True, False, True, False]


@pytest.mark.parametrize(
    "synopsis, args",
    [
        (
            "verify --table PATH [--input DIR --key ... | --result DIR/result.json]",
            ["verify", "--table", "PATH", "--input", "DIR", "--key", "X"],
        ),
        ("verify --table T | head -5", ["verify", "--table", "T"]),
        ("deadlock --protocol P [--out DIR]   # reports the cycle", ["deadlock", "--protocol", "P", "--out", "DIR"]),
        ("simulate --scenario deadlock|lock-held", ["simulate", "--scenario", "deadlock"]),
        ("...", None),
        ("COMMAND --help", None),
    ],
)
def test_a_synopsis_reads_as_one_way_to_write_the_command(synopsis, args):
    assert synopsis_args(synopsis) == args


@pytest.mark.usefixtures("in_a_notebook_folder")
def test_a_copy_of_the_readme_with_a_link_or_a_flag_broken_fails(tmp_path):
    for doc in [*documents(), *(ROOT / "docs").glob("*.png")]:
        copy = tmp_path / doc.relative_to(ROOT)
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(doc.read_bytes())
    readme = tmp_path / "README.md"
    assert not any(p.startswith("README.md") for p in broken_links(documents(tmp_path)))
    assert all(parse_error(args) is None for _, args in commands_named([readme]))
    text = readme.read_text()
    readme.write_text(
        text.replace("(docs/SIMULATOR.md)", "(docs/SIMULATION.md)", 1).replace("--writers N", "--writer-count N")
    )
    assert any("docs/SIMULATION.md: no file SIMULATION.md" in p for p in broken_links(documents(tmp_path)))
    errors = [parse_error(args) for _, args in commands_named([readme])]
    assert any(e and "--writer-count" in e for e in errors)
