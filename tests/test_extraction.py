from capa_hf.simulator.extraction import extract_submission, python_blocks, sanitize

FENCE = "```"


def block(code, tag="python"):
    return f"{FENCE}{tag}\n{code}\n{FENCE}"


def test_plain_question_is_not_a_submission():
    assert extract_submission("Should the list be sorted first?", "f") is None


def test_block_without_function_is_not_a_submission():
    assert extract_submission(block("x = [1, 2]\nprint(x)"), "f") is None


def test_non_python_block_is_ignored():
    assert extract_submission(block("def f(): return 1", tag="js"), "f") is None


def test_last_function_block_wins():
    reply = block("def f(x):\n    return 1") + "\nor better:\n" + block("def f(x):\n    return 2") + "\n" + block("print(3)")
    sub = extract_submission(reply, "f")
    assert "return 2" in sub.code and "return 1" not in sub.code


def test_binds_entry_point_when_defined():
    sub = extract_submission(block("def helper(x):\n    return x\n\ndef incr_list(l):\n    return [helper(i) + 1 for i in l]"), "incr_list")
    assert sub.candidate == "incr_list" and sub.binding == "entry_point"


def test_binds_root_function_otherwise():
    code = "def helper(x):\n    return x + 1\n\ndef bump_all(xs):\n    return [helper(x) for x in xs]"
    sub = extract_submission(block(code), "incr_list")
    assert sub.candidate == "bump_all" and sub.binding == "root_function"


def test_root_function_last_of_several_roots():
    code = "def a():\n    return 1\n\ndef b():\n    return 2"
    assert extract_submission(block(code), "zzz").candidate == "b"


def test_sanitize_keeps_what_the_root_reaches_and_drops_demo_code():
    code = ("import math\nfrom typing import List\nLIMIT = 10\nNAMES = ('a', 'b')\nSCALE = LIMIT * 2\n"
            "def f(x):\n    return math.floor(x) * SCALE\n\nclass K:\n    pass\n"
            "print(f(2.5))\nresult = f(3)\nwhile True:\n    pass\n"
            "if __name__ == '__main__':\n    print('demo')\n")
    kept, dropped = sanitize(code)
    assert "import math" in kept and "from typing import List" in kept      # every import of the block
    assert "LIMIT = 10" in kept and "SCALE = LIMIT * 2" in kept and "def f(x)" in kept
    assert "NAMES" not in kept and "class K" not in kept                     # nothing reaches them
    assert "print(f(2.5))" not in kept and "while True" not in kept and "__main__" not in kept
    assert "result = f(3)" not in kept
    assert dropped == ("NAMES = ('a', 'b')", "class K:\n    pass", "print(f(2.5))", "result = f(3)",
                       "while True:\n    pass", "if __name__ == '__main__':\n    print('demo')")


def test_statements_sharing_a_line_are_split():
    kept, dropped = sanitize("def f():\n    return X\nX = 1; print(X); Y = 2\n")
    assert kept == "def f():\n    return X\nX = 1\n" and dropped == ("print(X)", "Y = 2")


def test_a_later_definition_replaces_an_earlier_one_and_its_helpers():
    code = "def helper():\n    return 1\ndef f():\n    return helper()\ndef f():\n    return 2\n"
    kept, dropped = sanitize(code, "f")
    assert kept == "def f():\n    return 2\n" and len(dropped) == 2


def test_future_import_moves_to_the_top_once():
    reply = block("from __future__ import annotations\ndef g(x: int) -> int:\n    return x") + \
        block("from __future__ import annotations\ndef f(x: int) -> int:\n    return g(x)")
    sub = extract_submission(reply, "f")
    assert sub.code.startswith("from __future__ import annotations\ndef g")
    assert sub.code.count("__future__") == 1 and sub.block_rule == "merged_blocks" and sub.blocks == (0, 1)


def test_an_import_only_demo_code_reads_goes_with_it():
    kept, _ = sanitize("import doctest\nimport os\ndef f():\n    return 1\ndoctest.testmod()\n")
    assert "doctest" not in kept and "import os" in kept     # an unused import stays: imports are kept


def test_import_of_a_usage_block_runs_only_when_nothing_else_provides_the_name():
    reply = block("import re\n") + block("def f(s):\n    return re.sub('a', 'b', s)") + \
        block("from mymod import f\nimport json\nprint(f('a'))")
    sub = extract_submission(reply, "f")
    assert sub.code == "import re\ndef f(s):\n    return re.sub('a', 'b', s)\n"
    assert "from mymod import f" in sub.dropped and "import json" in sub.dropped


def test_test_blocks_are_set_aside_and_recorded():
    reply = block("def f(x):\n    return x") + block("import pytest\ndef test_f():\n    assert f(1) == 1") + \
        block("x = (\n")
    sub = extract_submission(reply, "f")
    assert sub.candidate == "f" and sub.block_rule == "candidate_block" and sub.blocks == (0,)
    assert sub.set_aside == ({"block": 1, "why": "tests"}, {"block": 2, "why": "unparsable"})
    reply = block("def f(x):\n    return x") + block("def g(:\n")      # the last block that defines a function
    assert extract_submission(reply, "f").block_rule == "unparsable"


def test_a_reply_of_tests_only_is_still_a_submission():
    sub = extract_submission(block("def test_f():\n    assert f(1) == 1"), "f")
    assert sub.candidate == "test_f" and sub.binding == "root_function"


def test_root_function_skips_tests_main_and_functions_passed_by_name():
    code = ("def norm(x):\n    return x\ndef f(xs):\n    return list(map(norm, xs))\n"
            "def test_f():\n    assert f([1]) == [1]\ndef main():\n    print(f([2]))\n")
    sub = extract_submission(block(code), "entry")
    assert sub.candidate == "f" and sub.binding == "root_function"


def test_record_keeps_the_old_fields_and_names_the_rule():
    d = extract_submission(block("def f():\n    return 1\nf()"), "f").to_dict()
    assert {k: d[k] for k in ("code", "candidate", "binding", "dropped")} == \
        {"code": "def f():\n    return 1\n", "candidate": "f", "binding": "entry_point", "dropped": ["f()"]}
    assert d["rule"] == "closure-1" and d["block_rule"] == "one_block" and d["blocks"] == [0] and d["set_aside"] == []


def test_decorated_function_is_kept_with_decorator():
    code = "import functools\n@functools.lru_cache(None)\ndef fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\nfib(10)"
    sub = extract_submission(block(code), "fib")
    assert "@functools.lru_cache(None)" in sub.code and sub.dropped == ("fib(10)",)


def test_unparsable_code_is_still_a_submission():
    sub = extract_submission(block("def f(x):\n    return (x"), "f")
    assert sub is not None and sub.candidate == "f" and sub.code.startswith("def f")


def test_unclosed_final_fence_counts():
    reply = "Here:\n```python\ndef f(x):\n    return x\n"
    assert python_blocks(reply) and extract_submission(reply, "f").candidate == "f"


def test_untagged_block_counts_as_python():
    assert extract_submission(block("def g():\n    return 1", tag=""), "f").candidate == "g"
