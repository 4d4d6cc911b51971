"""scripts/check-house on a copy of the tree: it passes on the tree as it is,
and each rule fails on the smallest change that breaks it, while the same
change where the rule allows it still passes."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def tree(tmp_path):
    for d in ("common", "daemon", "worker", "proto", "policy", "client"):
        shutil.copytree(os.path.join(ROOT, d), tmp_path / d,
                        ignore=shutil.ignore_patterns("*.ex", "*.exs", "node_modules", "elixir",
                                                      "python", "node", "mcp"))
    os.makedirs(tmp_path / "scripts")
    os.makedirs(tmp_path / "docs")
    shutil.copy(os.path.join(ROOT, "docs", "architecture.md"), tmp_path / "docs")
    shutil.copy(os.path.join(ROOT, "scripts", "check-house"), tmp_path / "scripts")
    return tmp_path


def check(tree):
    p = subprocess.run([str(tree / "scripts" / "check-house")], capture_output=True, text=True)
    return p.returncode, p.stdout


def edit(tree, path, old, new):
    f = tree / path
    s = f.read_text()
    assert old in s, (path, old)
    f.write_text(s.replace(old, new, 1))


def add_include(tree, path, line):
    f = tree / path
    s = f.read_text()
    i = s.index("#include")
    f.write_text(s[:i] + line + "\n" + s[i:])


def test_the_tree_passes(tree):
    rc, out = check(tree)
    assert rc == 0, out
    assert out.splitlines()[-1].startswith("5 passed, 0 failed")


def test_a_header_without_its_process_line_fails(tree):
    edit(tree, "daemon/outq.h", "/* Runs in: supervisor */\n", "")
    rc, out = check(tree)
    assert rc == 1 and "rule 1 (process line): daemon/outq.h" in out


def test_an_unknown_process_fails(tree):
    edit(tree, "daemon/outq.h", "/* Runs in: supervisor */", "/* Runs in: supervisr */")
    rc, out = check(tree)
    assert rc == 1 and "unknown process supervisr" in out


def test_a_c_file_without_a_header_needs_the_line(tree):
    edit(tree, "daemon/main.c", "/* Runs in: supervisor, zygote */\n", "")
    rc, out = check(tree)
    assert rc == 1 and "rule 1 (process line): daemon/main.c" in out


def test_lua_in_the_supervisor_fails_even_through_a_header(tree):
    add_include(tree, "daemon/outq.h", "#include <lua.h>")
    rc, out = check(tree)
    assert rc == 1 and "rule 2 (no Lua): daemon/outq.h includes Lua" in out
    # and every supervisor file that includes outq.h, through it
    assert "daemon/conn.c includes Lua: daemon/conn.c -> daemon/conn.h -> daemon/outq.h" in out


def test_lua_in_proto_fails(tree):
    add_include(tree, "proto/utf8.c", "#include <lauxlib.h>")
    rc, out = check(tree)
    assert rc == 1 and "rule 2 (no Lua): proto/utf8.c includes Lua" in out


def test_lua_in_the_worker_passes(tree):
    add_include(tree, "worker/look.c", "#include <lua.h>")
    rc, out = check(tree)
    assert rc == 0, out


def test_an_arrow_up_from_policy_fails(tree):
    add_include(tree, "policy/contain.c", '#include "worker/worker.h"')
    rc, out = check(tree)
    assert rc == 1 and "policy/contain.c includes worker/worker.h: policy/ may not include worker/" in out


def test_the_supervisor_including_a_worker_header_fails(tree):
    add_include(tree, "daemon/spawn.c", '#include "worker/zygote.h"')
    rc, out = check(tree)
    assert rc == 1 and "daemon/spawn.c includes worker/zygote.h" in out


def test_main_c_may_include_the_zygote(tree):
    rc, out = check(tree)
    assert rc == 0 and '#include "worker/zygote.h"' in (tree / "daemon/main.c").read_text()


def test_an_include_across_processes_fails(tree):
    add_include(tree, "worker/look.c", '#include "daemon/sched.h"')
    rc, out = check(tree)
    assert rc == 1 and "rule 4 (processes): worker/look.c (worker) includes daemon/sched.h (supervisor)" in out


def test_an_include_across_processes_through_a_header_fails(tree):
    """The zygote reaching a supervisor's header through one both run."""
    edit(tree, "common/log.h", "#define SANDBOXD_LOG_H",
         '#define SANDBOXD_LOG_H\n#include "policy/config.h"')
    rc, out = check(tree)
    assert rc == 1 and ("rule 4 (processes): worker/zygote.c (zygote) includes policy/config.h "
                        "(supervisor): worker/zygote.c -> common/log.h -> policy/config.h") in out, out


def test_a_header_both_sides_run_from_the_worker_passes_through_a_header(tree):
    add_include(tree, "worker/look.h", '#include "common/trace.h"')
    rc, out = check(tree)
    assert rc == 0, out


def test_common_may_not_include_another_folder(tree):
    add_include(tree, "common/trace.h", '#include "proto/utf8.h"')
    rc, out = check(tree)
    assert rc == 1 and "rule 3 (folders): common/trace.h includes proto/utf8.h: common/ may not include proto/" in out


def test_the_worker_may_not_include_the_daemon(tree):
    add_include(tree, "worker/look.c", '#include "daemon/list.h"')
    rc, out = check(tree)
    assert rc == 1 and "rule 3 (folders): worker/look.c includes daemon/list.h: worker/ may not include daemon/" in out


def test_a_shared_header_from_the_worker_passes(tree):
    add_include(tree, "worker/look.c", '#include "common/trace.h"')
    rc, out = check(tree)
    assert rc == 0, out


def test_a_file_missing_from_the_map_fails(tree):
    (tree / "daemon" / "extra.h").write_text("/* Runs in: supervisor */\n")
    rc, out = check(tree)
    assert rc == 1 and "rule 5 (map): docs/architecture.md: daemon/extra.h is missing" in out


def test_the_map_disagreeing_with_a_header_fails(tree):
    edit(tree, "docs/architecture.md", "| `worker/`: zygote | zygote |", "| `worker/`: zygote | worker |")
    rc, out = check(tree)
    assert rc == 1 and "says worker/zygote.c runs in worker, its line says zygote" in out


def test_a_header_moved_with_its_map_row_passes(tree):
    edit(tree, "worker/look.h", "/* Runs in: worker */", "/* Runs in: zygote, worker */")
    edit(tree, "docs/architecture.md", "bindings_lua, calls, codec, hint, jsonbig, look | worker |",
         "bindings_lua, calls, codec, hint, jsonbig | worker |\n| `worker/`: look | zygote, worker |")
    rc, out = check(tree)
    assert rc == 0, out
