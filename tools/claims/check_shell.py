"""Checks of shell blocks: command lines, their flags and the bundle scripts they run."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from .common import BUNDLE_SCRIPT_RE, LOCAL_URL_RE, PLACEHOLDER_RE, TRL_SCRIPT_RE
from .helpers import _is_option, _parser_flags, _vllm_option
from .markdown import CodeBlock
from .shell_split import iter_shell_commands, split_shell_commands
from .upstream import CliSpec, Context


class ShellChecks:
    """Command lines in shell blocks (part of ``Checker``)."""

    # ---- shell ---------------------------------------------------------------------------------------------------

    def check_shell_block(self, rel: str, block: CodeBlock, ctx: Context) -> None:
        for line_no, command in iter_shell_commands(block.lines, block.start_line, console=block.lang == "console"):
            self.check_command_tokens(rel, line_no, command, ctx)

    def _command_for(self, tokens: List[str]) -> Optional[Tuple[str, int]]:
        """(command kind, index of its first argument) when ``tokens`` start a covered command."""
        if not tokens:
            return None
        first = tokens[0].rsplit("/", 1)[-1]
        if first == "vllm" and len(tokens) > 1 and tokens[1] == "serve":
            return "vllm serve", 2
        if first == "trl" and len(tokens) > 1 and not tokens[1].startswith("-"):
            if PLACEHOLDER_RE.fullmatch(tokens[1]):
                return None
            return f"trl {tokens[1]}", 2
        if first == "accelerate" and len(tokens) > 1 and tokens[1] == "launch":
            return "accelerate launch", 2
        if first == "hf" and len(tokens) > 1 and tokens[1] in ("jobs", "buckets"):
            return "hf", 1
        if re.match(r"^python(\d(\.\d+)?)?$", first) and len(tokens) > 1:
            if tokens[1] == "-m" and len(tokens) > 2:
                module = tokens[2]
                if module == "trl" or module == "trl.cli.main":
                    return ("trl " + tokens[3], 4) if len(tokens) > 3 else None
                if module == "vllm.entrypoints.openai.api_server":
                    return "vllm serve", 3
                if module.startswith("trl.scripts."):
                    return "trl-script " + module.rsplit(".", 1)[-1], 3
                if module in ("accelerate.commands.launch",):
                    return "accelerate launch", 3
                return None
            return self._script_command(tokens[1], 2)
        return self._script_command(tokens[0], 1)

    def _script_command(self, path: str, index: int) -> Optional[Tuple[str, int]]:
        if BUNDLE_SCRIPT_RE.search(path) and not TRL_SCRIPT_RE.search(path):
            return "bundle " + BUNDLE_SCRIPT_RE.search(path).group(1), index  # type: ignore[union-attr]
        trl_script = TRL_SCRIPT_RE.search(path)
        if trl_script:
            return "trl-script " + trl_script.group(1), index
        return None

    def check_command_tokens(self, rel: str, line: int, tokens: List[str], ctx: Context) -> None:
        tokens = self._strip_env_prefix(rel, line, tokens, ctx)
        if tokens and tokens[0].rsplit("/", 1)[-1] in ("curl", "wget", "http", "xh"):
            for token in tokens[1:]:
                for url_path in LOCAL_URL_RE.findall(token):
                    if url_path.rstrip("/"):
                        self.check_route(rel, line, url_path, ctx)
            return
        found = self._command_for(tokens)
        if found is None:
            return
        kind, start = found
        args = tokens[start:]
        self.record(rel, line, "command", kind if kind != "hf" else " ".join(tokens[:3]))
        if kind == "hf":
            self._check_hf(rel, line, tokens, ctx)
            return
        if kind.startswith("bundle "):
            spec = self._script_spec(kind.split(" ", 1)[1])
            if spec is None:
                self.fail(
                    rel,
                    line,
                    "script",
                    f"scripts/{kind.split(' ', 1)[1]}",
                    "this bundle's scripts/",
                    [f"scripts/{p.name}" for p in sorted((self.root / "scripts").glob("*.py"))],
                    note="the command runs a script that does not exist",
                )
                return
            if spec.flags is None:  # exists but has no build_parser yet
                return
            self.check_flags(rel, line, args, spec)
            return
        if kind.startswith("trl-script "):
            name = kind.split(" ", 1)[1]
            spec = ctx.clis.get(f"trl {name}")
            if spec is not None:
                launcher = spec.__dict__.get("launcher_flags", set()) - {"--config"}
                flags = {k: v for k, v in spec.flags.items() if k not in launcher}
                self.check_flags(rel, line, args, CliSpec(f"trl/scripts/{name}.py", spec.source, flags, spec.normalize))
            return
        if kind.startswith("trl ") and "|" in kind:  # ``trl sft|dpo|grpo --flag``: every alternative
            for alternative in kind[4:].split("|"):
                self.check_command_tokens(rel, line, ["trl", alternative, *args], ctx)
            return
        spec = ctx.clis.get(kind)
        if spec is None:
            if kind.startswith("trl "):
                subcommands = [n for n in ctx.clis if n.startswith("trl ")]
                self.record(rel, line, "command", kind)
                self.fail(rel, line, "command", kind, f"trl subcommands@{ctx.label}", subcommands)
            return
        rest = self.check_flags(rel, line, args, spec)
        if kind == "accelerate launch" and rest:
            script = rest[0]
            trl_script = TRL_SCRIPT_RE.search(script)
            if trl_script and f"trl {trl_script.group(1)}" in ctx.clis:
                self.check_command_tokens(rel, line, ["python", script, *rest[1:]], ctx)

    def _strip_env_prefix(self, rel: str, line: int, tokens: List[str], ctx: Context) -> List[str]:
        out = list(tokens)
        while out:
            head = out[0]
            assignment = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=", head)
            if assignment:
                self.check_env(rel, line, assignment.group(1), ctx)
                out = out[1:]
            elif head in ("export", "unset") and len(out) > 1:
                for item in out[1:]:
                    name = item.split("=", 1)[0]
                    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                        self.check_env(rel, line, name, ctx)
                return []
            elif head in ("env", "sudo", "nohup", "time", "exec", "command"):
                out = out[1:]
            else:
                break
        return out

    def check_flags(self, rel: str, line: int, args: List[str], spec: CliSpec) -> List[str]:
        """Check every option in ``args``; return the arguments from the first positional on when the command stops
        parsing options there (``accelerate launch script.py --its-own-flags``), else ``[]``."""
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                return args[i + 1 :] if spec.positional_ends_options else []
            if _is_option(token):
                name, has_value, _ = token.partition("=")
                lookup_name = name
                if spec.name in ("vllm serve", "trl vllm-serve") or (
                    spec.forwards_to is not None and spec.forwards_to.name == "vllm serve"
                ):
                    lookup_name = _vllm_option(name)
                self.record(rel, line, "flag", name)
                record = {"takes_value": False} if name in ("-h", "--help") else spec.lookup(lookup_name)
                if record is None:
                    self.fail(rel, line, "flag", name, spec.label(), spec.all_flags())
                    record = {}
                takes_value = record.get("takes_value", True)
                if not has_value and takes_value and i + 1 < len(args) and not _is_option(args[i + 1]):
                    i += 1  # the option's value
                i += 1
                continue
            if spec.positional_ends_options:
                return args[i:]
            i += 1
        return []

    def _check_hf(self, rel: str, line: int, tokens: List[str], ctx: Context) -> None:
        words = ["hf"]
        i = 1
        names = [n for n in ctx.clis if n.startswith("hf ")]
        while i < len(tokens) and not tokens[i].startswith("-"):
            candidate = " ".join([*words, tokens[i]])
            if any(n == candidate or n.startswith(candidate + " ") for n in names):
                words.append(tokens[i])
                i += 1
            else:
                break
        command = " ".join(words)
        if command not in ctx.clis:
            self.record(rel, line, "command", command)
            if len(words) <= 2 and i < len(tokens) and not tokens[i].startswith("-"):
                command = " ".join([*words, tokens[i]])
            self.fail(rel, line, "command", command, f"hf commands@{ctx.label}", names)
            return
        spec = ctx.clis[command]
        options = tokens[i:]
        for flag, value in zip(options, options[1:]):  # ``-e NAME=value`` / ``--secrets NAME``: env var claims
            if flag in ("-e", "--env", "-s", "--secrets") and re.match(r"^[A-Z][A-Z0-9_]*(=|$)", value):
                self.check_env(rel, line, value.split("=", 1)[0], ctx)
        rest = self.check_flags(rel, line, options, spec)
        if command.endswith("jobs run") and len(rest) > 1:  # IMAGE then the container's command line
            inner = rest[1:]
            if len(inner) >= 3 and inner[0] in ("bash", "sh") and inner[1] == "-c":
                for sub in split_shell_commands(inner[2]):
                    self.check_command_tokens(rel, line, sub, ctx)
            else:
                self.check_command_tokens(rel, line, inner, ctx)
        elif command.endswith("uv run") and rest:
            trl_script = TRL_SCRIPT_RE.search(rest[0])
            if trl_script:
                self.check_command_tokens(rel, line, ["python", rest[0], *rest[1:]], ctx)

    # ---- bundle scripts ------------------------------------------------------------------------------------------

    def _all_script_specs(self) -> List[Optional[CliSpec]]:
        folder = self.root / "scripts"
        if folder.is_dir():
            for path in sorted(folder.glob("*.py")):
                self._script_spec(path.name)
        return [s for s in self._script_specs.values() if s is not None and s.flags is not None]

    def _script_spec(self, name: str) -> Optional[CliSpec]:
        """The options of ``scripts/<name>`` from its ``build_parser()``; None when the file does not exist;
        a spec with ``flags=None`` when it exists but exposes no parser."""
        if name in self._script_specs:
            return self._script_specs[name]
        path = self.root / "scripts" / name
        spec: Optional[CliSpec] = None
        if path.is_file():
            flags = _parser_flags(path)
            spec = CliSpec(f"scripts/{name}", "this bundle", flags if flags is not None else {}, "exact")
            if flags is None:
                spec.flags = None  # type: ignore[assignment]
        self._script_specs[name] = spec
        return spec
