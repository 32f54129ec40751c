"""Fish completion that works in fish 3.6 (issue 35 item 4, decision 0163).

Click 8.4's fish script splits each answer with `string split` and a literal newline written
inside its template (a bare newline ends a fish command: "string split: missing argument"), while
its `fish_complete` answer prints type, value and help on three lines each: fish's command
substitution splits on newlines, so nothing lines up and nothing completes. This class answers one
line per item, `type<TAB>value<TAB>help` (tabs and newlines inside a value or help are spaces),
and its script splits on the tab; `register` puts it in Click's place for `fish_source` and
`fish_complete`, before the command line is parsed (opsctl.cli.main)."""

from __future__ import annotations

from click.shell_completion import CompletionItem, FishComplete, add_completion_class

_SCRIPT = """\
function %(complete_func)s
    set -l response (env %(complete_var)s=fish_complete COMP_WORDS=(commandline -cp) \
COMP_CWORD=(commandline -t) %(prog_name)s)
    for completion in $response
        set -l metadata (string split -- \\t $completion)
        switch $metadata[1]
            case dir
                __fish_complete_directories $metadata[2]
            case file
                __fish_complete_path $metadata[2]
            case plain
                if test "$metadata[3]" != _
                    printf '%%s\\t%%s\\n' $metadata[2] $metadata[3]
                else
                    printf '%%s\\n' $metadata[2]
                end
        end
    end
end

complete --no-files --command %(prog_name)s --arguments "(%(complete_func)s)"
"""


class OneLineFishComplete(FishComplete):
    """Click's FishComplete with one line per completion and a script fish 3.6 parses."""

    source_template = _SCRIPT

    def format_completion(self, item: CompletionItem) -> str:
        def flat(text: str) -> str:
            return " ".join(text.replace("\t", " ").splitlines())

        return f"{item.type}\t{flat(item.value)}\t{flat(item.help) if item.help else '_'}"


def register() -> None:
    add_completion_class(OneLineFishComplete, "fish")
