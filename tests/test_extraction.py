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


def test_sanitize_keeps_defs_imports_constants_and_drops_demo_code():
    code = ("import math\nfrom typing import List\nLIMIT = 10\nNAMES = ('a', 'b')\n"
            "def f(x):\n    return math.floor(x)\n\nclass K:\n    pass\n"
            "print(f(2.5))\nresult = f(3)\nwhile True:\n    pass\n"
            "if __name__ == '__main__':\n    print('demo')\n")
    kept, dropped = sanitize(code)
    assert "import math" in kept and "LIMIT = 10" in kept and "NAMES = ('a', 'b')" in kept
    assert "def f(x)" in kept and "class K" in kept
    assert "print(f(2.5))" not in kept and "while True" not in kept and "__main__" not in kept
    assert "result = f(3)" not in kept  # not a literal constant
    assert len(dropped) == 4


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
