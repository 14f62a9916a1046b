"""``gpubot completion bash|zsh|fish``: completion scripts made from the CLI's own parser,
so a new subcommand or flag completes without editing this file. Subcommands, flags and
choices are in the script; contexts, namespaces, pods, nodes and clusters are asked of
``gpubot __complete`` (``bot/complete.py``) at each TAB, from the cluster or snapshot the line
names.

    source <(gpubot completion bash)                      # ~/.bashrc
    source <(gpubot completion zsh)                       # ~/.zshrc (via bashcompinit)
    gpubot completion fish > ~/.config/fish/completions/gpubot.fish
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from bot.complete import dynamic_commands, dynamic_options

# Options whose value is a file or directory: completed with file names.
_PATH_OPTIONS = {"--snapshot", "--kubeconfig", "--config"}


@dataclass
class _Command:
    name: str
    help: str
    options: list[str] = field(default_factory=list)
    groups: list[list[str]] = field(default_factory=list)  # one per action: -n --namespace
    choices: dict[str, list[str]] = field(default_factory=dict)  # option -> its values
    takes_value: set[str] = field(default_factory=set)
    positional_choices: list[str] = field(default_factory=list)


def _describe(parser: argparse.ArgumentParser) -> tuple[_Command, list[_Command]]:
    top = _Command("", "")
    commands: list[_Command] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                cmd = _Command(name, helps.get(name, ""))
                _options(sub, cmd)
                commands.append(cmd)
        else:
            _options_of(action, top)
    return top, commands


def _options(parser: argparse.ArgumentParser, cmd: _Command) -> None:
    for action in parser._actions:
        _options_of(action, cmd)


def _options_of(action: argparse.Action, cmd: _Command) -> None:
    if not action.option_strings:
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            cmd.positional_choices += [str(c) for c in action.choices]
        return
    cmd.options += action.option_strings
    cmd.groups.append(list(action.option_strings))
    if action.nargs != 0:
        cmd.takes_value.update(action.option_strings)
    if action.choices:
        for opt in action.option_strings:
            cmd.choices[opt] = [str(c) for c in action.choices]


def _bash(parser: argparse.ArgumentParser) -> str:
    top, commands = _describe(parser)
    names = " ".join(c.name for c in commands)
    cases = []
    for c in commands:
        words = " ".join([*c.options, *c.positional_choices])
        cases.append(f"    {c.name}) opts={shlex.quote(words)} ;;")
    values = {}
    for c in [top, *commands]:
        for opt, choices in c.choices.items():
            values[opt] = " ".join(choices)
    value_cases = []
    for opt, v in sorted(values.items()):
        choose = f"COMPREPLY=($(compgen -W {shlex.quote(v)} -- \"$cur\"))"
        # A command whose option of that name takes no choice (snapshot's -o DIR|FILE).
        other = [c.name for c in commands if opt in c.options and opt not in c.choices]
        if other:
            choose = (f'case " {" ".join(other)} " in *" $cmd "*) COMPREPLY=($(compgen -f -- '
                      f'"$cur")) ;; *) {choose} ;; esac')
        value_cases.append(f"    {opt}) {choose}; return ;;")
    paths = "|".join(sorted(_PATH_OPTIONS))
    dynamic = dynamic_options(parser)
    dynamic_alts = "|".join(dynamic) or "--no-such-option"
    dynamic_eq = "|".join(f"{o}=*" for o in dynamic if o.startswith("--")) or "--no-such=*"
    takes = sorted({o for c in [top, *commands] for o in c.takes_value} - set(values)
                   - _PATH_OPTIONS - set(dynamic))
    return f"""# bash completion for gpubot: source <(gpubot completion bash)
_gpubot() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local commands={shlex.quote(names)} cmd="" opts="" i
  # A context, namespace or cluster: bash splits a word at ":" and "=" (--context=arn:aws:eks:
  # ...), so the option is found in the line's own words.
  local line="${{COMP_LINE:0:COMP_POINT}}"
  local word="${{line##*[[:space:]]}}" before="${{line%[[:space:]]*}}"
  [[ $before == "$line" ]] && before=""
  case "${{before##*[[:space:]]}}" in {dynamic_alts}) _gpubot_values; return ;; esac
  case "$word" in {dynamic_eq}) _gpubot_values; return ;; esac
  # --flag=value: bash splits at "=", the value is the word after it.
  if [[ $cur == "=" ]]; then cur=""
  elif [[ $prev == "=" ]]; then prev="${{COMP_WORDS[COMP_CWORD-2]}}"; fi
  for ((i = 1; i < COMP_CWORD; i++)); do
    case " $commands " in *" ${{COMP_WORDS[i]}} "*) cmd="${{COMP_WORDS[i]}}"; break ;; esac
  done
  case "$prev" in
{chr(10).join(value_cases)}
    {paths}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    {"|".join(takes) or "--no-such-option"}) COMPREPLY=(); return ;;
  esac
  case "$cmd" in
{chr(10).join(cases)}
    *) opts="$commands {" ".join(top.options)}" ;;
  esac
  # A node, pod or namespace argument; flags when there is none to give.
  case " {" ".join(dynamic_commands(parser))} " in
    *" $cmd "*) [[ $cur != -* ]] && _gpubot_values && return ;;
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
# Values from the cluster or snapshot the line names, within 2 s, nothing on failure.
_gpubot_values() {{
  local IFS=$'\\n'
  COMPREPLY=($(gpubot __complete "${{COMP_LINE:0:COMP_POINT}}" "$COMP_WORDBREAKS" 2>/dev/null))
  [[ ${{#COMPREPLY[@]}} -gt 0 ]] || {{ compopt +o default 2>/dev/null; false; }}
}}
complete -o default -F _gpubot gpubot
"""


def _zsh(parser: argparse.ArgumentParser) -> str:
    return ("# zsh completion for gpubot: source <(gpubot completion zsh)\n"
            "autoload -U +X compinit && compinit\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + _bash(parser))


def _fish(parser: argparse.ArgumentParser) -> str:
    top, commands = _describe(parser)
    names = " ".join(c.name for c in commands)
    dynamic = set(dynamic_options(parser))
    lines = ["# fish completion for gpubot: gpubot completion fish | source",
             "complete -c gpubot -f"]
    for c in commands:
        lines.append(f"complete -c gpubot -n 'not __fish_seen_subcommand_from {names}' "
                     f"-a {c.name} -d {shlex.quote(c.help)}")
    for c in [top, *commands]:
        cond = (f"__fish_seen_subcommand_from {c.name}" if c.name
                else f"not __fish_seen_subcommand_from {names}")
        for group in c.groups:
            if "--help" in group:
                continue
            flags = " ".join(f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}"
                             for o in group)
            opt = group[-1]
            extra = ""
            if opt in c.choices:
                extra = f" -x -a {shlex.quote(' '.join(c.choices[opt]))}"
            elif opt in dynamic:
                extra = f" -x -a {shlex.quote(_FISH_VALUES)}"
            elif opt in _PATH_OPTIONS:
                extra = " -r -F"
            elif opt in c.takes_value:
                extra = " -x"
            lines.append(f"complete -c gpubot -n {shlex.quote(cond)} {flags}{extra}")
        if c.positional_choices:
            lines.append(f"complete -c gpubot -n {shlex.quote(cond)} "
                         f"-a {shlex.quote(' '.join(c.positional_choices))}")
        if c.name in dynamic_commands(parser):
            lines.append(f"complete -c gpubot -n {shlex.quote(cond)} "
                         f"-a {shlex.quote(_FISH_VALUES)}")
    return "\n".join(lines) + "\n"


# fish completes an option's value after its "=" itself: the values are cut there.
_FISH_VALUES = "(gpubot __complete (commandline -cp) = 2>/dev/null)"


SHELLS = {"bash": _bash, "zsh": _zsh, "fish": _fish}


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    return SHELLS[shell](parser)
