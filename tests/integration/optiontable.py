"""The option table (src/config/options.c) as build/tools/options prints it: the one list of
options, their scope and whether a reload can change them, that the tests hold --help, README,
the man page and the binary's behaviour to. The tool next to $RINGHTTPD is used (build/asan
has its own), else the one in build/."""
import collections
import pathlib
import subprocess

from conftest import RINGHTTPD

REPO = pathlib.Path(__file__).resolve().parents[2]

# scope: process, site, site-own (a site's hosts, default) or argv; reload: True when a reload
# applies a new value; value: takes one (else a flag); where: argv+file, file or argv.
Option = collections.namedtuple("Option", "name scope reload value where")


def option_table():
    tool = pathlib.Path(RINGHTTPD).parent / "tools" / "options"
    if not tool.exists():
        tool = REPO / "build" / "tools" / "options"
    assert tool.exists(), f"{tool} is missing (built by `make` from tests/tools/options.c)"
    out = subprocess.run([str(tool)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        name, scope, reload, arg, where = line.split()
        table[name] = Option(name, scope, reload == "reload", arg == "value", where)
    assert len(table) > 50, out
    return table
