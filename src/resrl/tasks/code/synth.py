"""`stdin-synth`: a small GENERATED set of competitive-programming problems in LiveCodeBench's
`code_generation_lite` row format, shipped in the package for tests, examples and smoke runs.

It is not LiveCodeBench, CodeForces or any real contest: 16 stdin/stdout problems (sums, ranges,
strings, brackets, a multi-test-case format, a fixed-precision float output, one problem whose
large test needs an O(n) solution) and 2 LeetCode-style functional ones, written for resrl. Each
problem has a statement, one public test (its example) and 8 private tests drawn from a seeded
generator; expected outputs come from the problem's `solve` (Python, in this process), and its
`reference` program — written separately — must reproduce them in the sandbox
(tests/test_code_stdin.py). Private tests are stored the way `code_generation_lite` stores them,
base64(zlib(pickle(JSON text))), so every load exercises the restricted decoder.

    python -m resrl.tasks.code.synth OUT.jsonl   # regenerate (byte-identical for the same code)
    resrl eval --model DIR --data stdin-synth --n 16

The packaged copy is `resrl/data/packaged/code/stdin-synth.jsonl`; `load_problems("stdin-synth")`
reads it through the LiveCodeBench loader (`resrl.tasks.code.contests`).
"""

from __future__ import annotations

import base64
import json
import math
import pickle
import random
import zlib
from dataclasses import dataclass
from typing import Callable

NUM_PRIVATE = 8
CONTEST_ID = "resrl-stdin-synth"
CONTEST_DATE = "2026-01-01T00:00:00"
MOD = 10 ** 9 + 7


@dataclass(frozen=True)
class SynthProblem:
    """One generated problem: statement, difficulty, a test generator, the expected-output
    function, and a reference program (stdin/stdout, or a `class Solution` for functional ones)."""

    name: str
    title: str
    statement: str
    difficulty: str  # LiveCodeBench's easy / medium / hard
    gen: Callable[[random.Random, bool], str]  # (rng, large) -> stdin text (functional: JSON lines)
    solve: Callable[[str], str]  # stdin text -> expected stdout (functional: JSON of the return value)
    reference: str
    func_name: str | None = None  # functional (LeetCode-style) problems
    starter: str = ""


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split()]


def _gen_ab(rng, large):
    return f"{rng.randint(-10 ** 9, 10 ** 9)} {rng.randint(-10 ** 9, 10 ** 9)}\n"


def _gen_array(lo, hi, max_n):
    def gen(rng, large):
        n = rng.randint(1, max_n)
        return f"{n}\n" + " ".join(str(rng.randint(lo, hi)) for _ in range(n)) + "\n"
    return gen


def _gen_words(rng, large):
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 10))]
    return " ".join(words) + "\n"


def _gen_letters(alphabet, max_len):
    def gen(rng, large):
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len))) + "\n"
    return gen


def _gen_products(rng, large):
    t = rng.randint(1, 8)
    return f"{t}\n" + "".join(f"{rng.randint(0, 10 ** 6)} {rng.randint(0, 10 ** 6)}\n" for _ in range(t))


def _gen_gcd(rng, large):
    g = rng.randint(1, 1000)
    return f"{g * rng.randint(1, 1000)} {g * rng.randint(1, 1000)}\n"


def _gcd_lcm(a, b):
    g = math.gcd(a, b)
    return f"{g} {a * b // g}"


def _gen_ranges(rng, large):
    n, q = rng.randint(1, 12), rng.randint(1, 6)
    arr = [rng.randint(-100, 100) for _ in range(n)]
    lines = [f"{n} {q}", " ".join(map(str, arr))]
    for _ in range(q):
        lo = rng.randint(1, n)
        lines.append(f"{lo} {rng.randint(lo, n)}")
    return "\n".join(lines) + "\n"


def _solve_ranges(text):
    data = _ints(text)
    n, q = data[0], data[1]
    arr, qs = data[2:2 + n], data[2 + n:]
    return "\n".join(str(sum(arr[qs[2 * i] - 1:qs[2 * i + 1]])) for i in range(q))


def _gen_pairs(rng, large):
    n = 30000 if large else rng.randint(2, 12)
    k = rng.randint(0, 20)
    return f"{n} {k}\n" + " ".join(str(rng.randint(0, 20)) for _ in range(n)) + "\n"


def _solve_pairs(text):
    data = _ints(text)
    n, k, arr = data[0], data[1], data[2:]
    counts: dict[int, int] = {}
    total = 0
    for x in arr:
        total += counts.get(k - x, 0)
        counts[x] = counts.get(x, 0) + 1
    return str(total)


def _gen_grid(rng, large):
    n, m = rng.randint(1, 6), rng.randint(1, 6)
    return f"{n} {m}\n" + "".join("".join(rng.choice(".#") for _ in range(m)) + "\n" for _ in range(n))


def _gen_brackets(rng, large):
    t = rng.randint(1, 6)
    lines = []
    for _ in range(t):
        if rng.random() < 0.5:  # a balanced one
            s = ""
            for _ in range(rng.randint(1, 5)):
                o, c = rng.choice(["()", "[]", "{}"])
                s = rng.choice([o + s + c, s + o + c])
        else:
            s = "".join(rng.choice("()[]{}") for _ in range(rng.randint(1, 8)))
        lines.append(s)
    return f"{t}\n" + "\n".join(lines) + "\n"


def _balanced(s):
    stack, pairs = [], {")": "(", "]": "[", "}": "{"}
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != pairs[ch]:
            return False
    return not stack


def _longest_run(s):
    best = run = 0
    prev = None
    for ch in s:
        run = run + 1 if ch == prev else 1
        prev = ch
        best = max(best, run)
    return best


def _fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % MOD
    return a


def _gen_list_json(rng, large):
    return json.dumps([rng.randint(-50, 50) for _ in range(rng.randint(0, 8))]) + "\n"


def _gen_str_json(rng, large):
    half = "".join(rng.choice("abc") for _ in range(rng.randint(0, 4)))
    s = half + half[::-1] if rng.random() < 0.5 else "".join(rng.choice("abc") for _ in range(rng.randint(1, 7)))
    return json.dumps(s) + "\n"


PROBLEMS: tuple[SynthProblem, ...] = (
    SynthProblem("a-plus-b", "A plus B", "Read two integers a and b (|a|, |b| <= 10^9) on one line and print a + b.",
                 "easy", _gen_ab, lambda t: str(sum(_ints(t))),
                 "a, b = map(int, input().split())\nprint(a + b)\n"),
    SynthProblem("array-sum", "Sum of an array",
                 "The first line holds n (1 <= n <= 20), the second n integers. Print their sum.", "easy",
                 _gen_array(-1000, 1000, 20), lambda t: str(sum(_ints(t)[1:])),
                 "input()\nprint(sum(map(int, input().split())))\n"),
    SynthProblem("max-min", "Largest and smallest",
                 "The first line holds n (1 <= n <= 20), the second n integers. Print the largest and the smallest, "
                 "separated by a space.", "easy", _gen_array(-1000, 1000, 20),
                 lambda t: f"{max(_ints(t)[1:])} {min(_ints(t)[1:])}",
                 "input()\na = list(map(int, input().split()))\nprint(max(a), min(a))\n"),
    SynthProblem("reverse-words", "Reverse the words",
                 "One line of lowercase words separated by single spaces. Print the words in reverse order, separated "
                 "by single spaces.", "easy", _gen_words, lambda t: " ".join(reversed(t.split())),
                 "print(' '.join(input().split()[::-1]))\n"),
    SynthProblem("count-vowels", "Vowels", "One line of lowercase letters. Print how many of them are vowels (a, e, i, "
                 "o, u).", "easy", _gen_letters("abcdeiou", 30), lambda t: str(sum(c in "aeiou" for c in t.strip())),
                 "print(sum(c in 'aeiou' for c in input().strip()))\n"),
    SynthProblem("products", "Many products",
                 "The first line holds t (1 <= t <= 8), the number of test cases. Each of the next t lines holds two "
                 "integers a and b (0 <= a, b <= 10^6). For each test case print a * b on its own line.", "medium",
                 _gen_products, lambda t: "\n".join(str(a * b) for a, b in zip(_ints(t)[1::2], _ints(t)[2::2])),
                 "t = int(input())\nfor _ in range(t):\n    a, b = map(int, input().split())\n    print(a * b)\n"),
    SynthProblem("gcd-lcm", "GCD and LCM",
                 "Read two positive integers a and b (at most 10^6). Print their greatest common divisor and least "
                 "common multiple, separated by a space.", "medium", _gen_gcd, lambda t: _gcd_lcm(*_ints(t)),
                 "import math\na, b = map(int, input().split())\ng = math.gcd(a, b)\nprint(g, a // g * b)\n"),
    SynthProblem("range-sums", "Range sums",
                 "The first line holds n and q. The second line holds n integers a_1..a_n. Each of the next q lines "
                 "holds l and r (1 <= l <= r <= n): print a_l + ... + a_r on its own line.", "medium", _gen_ranges,
                 _solve_ranges,
                 "import sys\ndata = sys.stdin.read().split()\nn, q = int(data[0]), int(data[1])\n"
                 "p = [0]\nfor x in data[2:2 + n]:\n    p.append(p[-1] + int(x))\nout = []\n"
                 "for i in range(q):\n    l, r = int(data[2 + n + 2 * i]), int(data[3 + n + 2 * i])\n"
                 "    out.append(str(p[r] - p[l - 1]))\nprint('\\n'.join(out))\n"),
    SynthProblem("average", "Average", "The first line holds n (1 <= n <= 20), the second n integers. Print their "
                 "mean with exactly 6 digits after the decimal point.", "medium", _gen_array(-1000, 1000, 20),
                 lambda t: f"{sum(_ints(t)[1:]) / _ints(t)[0]:.6f}",
                 "n = int(input())\na = list(map(int, input().split()))\nprint(f'{sum(a) / n:.6f}')\n"),
    SynthProblem("sort", "Sort", "The first line holds n (1 <= n <= 20), the second n integers. Print them in "
                 "non-decreasing order, separated by spaces.", "easy", _gen_array(-50, 50, 20),
                 lambda t: " ".join(map(str, sorted(_ints(t)[1:]))),
                 "input()\nprint(*sorted(map(int, input().split())))\n"),
    SynthProblem("distinct", "Distinct values", "The first line holds n (1 <= n <= 20), the second n integers. Print "
                 "how many different values they take.", "easy", _gen_array(0, 9, 20),
                 lambda t: str(len(set(_ints(t)[1:]))), "input()\nprint(len(set(input().split())))\n"),
    SynthProblem("fibonacci", "Fibonacci modulo", "Read n (0 <= n <= 10^5). Print F(n) modulo 1000000007, where "
                 "F(0) = 0, F(1) = 1 and F(k) = F(k-1) + F(k-2).", "medium",
                 lambda rng, large: f"{rng.randint(0, 10 ** 5)}\n", lambda t: str(_fib(int(t))),
                 "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, (a + b) % 1000000007\nprint(a)\n"),
    SynthProblem("longest-run", "Longest run", "One line of letters a and b. Print the length of its longest block of "
                 "equal consecutive letters.", "medium", _gen_letters("ab", 30),
                 lambda t: str(_longest_run(t.strip())),
                 "s = input().strip()\nbest = run = 1\nfor i in range(1, len(s)):\n"
                 "    run = run + 1 if s[i] == s[i - 1] else 1\n    best = max(best, run)\nprint(best)\n"),
    SynthProblem("pair-sums", "Pairs with a given sum",
                 "The first line holds n and k (2 <= n <= 30000, 0 <= k <= 20), the second n integers in [0, 20]. "
                 "Print the number of pairs i < j with a_i + a_j = k. (The largest test needs a solution faster than "
                 "trying every pair.)", "hard", _gen_pairs, _solve_pairs,
                 "from collections import Counter\nn, k = map(int, input().split())\n"
                 "a = list(map(int, input().split()))\nc = Counter(a)\n"
                 "total = sum(c[x] * c[k - x] for x in c if x < k - x)\n"
                 "if k % 2 == 0:\n    total += c[k // 2] * (c[k // 2] - 1) // 2\nprint(total)\n"),
    SynthProblem("grid-count", "Filled cells", "The first line holds n and m, then n lines of m characters '.' or "
                 "'#'. Print the number of '#'.", "easy", _gen_grid,
                 lambda t: str(sum(line.count("#") for line in t.splitlines()[1:])),
                 "n, m = map(int, input().split())\nprint(sum(input().count('#') for _ in range(n)))\n"),
    SynthProblem("brackets", "Balanced brackets",
                 "The first line holds t, then t lines, each a string of the characters ()[]{}. For each, print YES "
                 "if it is balanced and NO otherwise.", "medium", _gen_brackets,
                 lambda t: "\n".join("YES" if _balanced(s) else "NO" for s in t.split("\n")[1:] if s),
                 "t = int(input())\nfor _ in range(t):\n    s = input().strip()\n    st = []\n    ok = True\n"
                 "    for ch in s:\n        if ch in '([{':\n            st.append(ch)\n"
                 "        elif not st or st.pop() + ch not in ('()', '[]', '{}'):\n            ok = False\n"
                 "            break\n    print('YES' if ok and not st else 'NO')\n"),
    SynthProblem("sum-of-squares", "Sum of squares", "Given a list of integers nums, return the sum of their squares.",
                 "easy", _gen_list_json, lambda t: json.dumps(sum(x * x for x in json.loads(t))),
                 "class Solution:\n    def sumOfSquares(self, nums: List[int]) -> int:\n"
                 "        return sum(x * x for x in nums)\n", func_name="sumOfSquares",
                 starter="class Solution:\n    def sumOfSquares(self, nums: List[int]) -> int:\n        "),
    SynthProblem("palindrome", "Palindrome", "Given a string s, return true if it reads the same backwards.", "easy",
                 _gen_str_json, lambda t: json.dumps(json.loads(t) == json.loads(t)[::-1]),
                 "class Solution:\n    def isPalindrome(self, s: str) -> bool:\n        return s == s[::-1]\n",
                 func_name="isPalindrome",
                 starter="class Solution:\n    def isPalindrome(self, s: str) -> bool:\n        "),
)


def encode_private(tests: list[dict]) -> str:
    """base64(zlib(pickle(JSON text))): how `code_generation_lite` stores private tests."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests), protocol=4))).decode("ascii")


def problem_tests(p: SynthProblem, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(public, private) tests of a problem: 1 example and NUM_PRIVATE private tests (the last one
    `large` where the generator has a large case)."""
    rng = random.Random(f"stdin-synth/{seed}/{p.name}")
    kind = "functional" if p.func_name else "stdin"
    inputs = [p.gen(rng, i == NUM_PRIVATE) for i in range(NUM_PRIVATE + 1)]
    tests = [{"input": x, "output": p.solve(x), "testtype": kind} for x in inputs]
    return tests[:1], tests[1:]


def synth_rows(seed: int = 0) -> list[dict]:
    """The set as LiveCodeBench `code_generation_lite` rows."""
    rows = []
    for i, p in enumerate(PROBLEMS):
        public, private = problem_tests(p, seed)
        example = (f"\n\nExample\nInput:\n{public[0]['input'].rstrip()}\nOutput:\n{public[0]['output']}"
                   if not p.func_name else f"\n\nExample\nInput: {public[0]['input'].strip()}\nOutput: {public[0]['output']}")
        rows.append({
            "question_title": p.title, "question_content": p.statement + example,
            "platform": "leetcode" if p.func_name else "atcoder",  # LiveCodeBench's enum; the problems are generated
            "question_id": f"synth-{i:02d}-{p.name}", "contest_id": CONTEST_ID, "contest_date": CONTEST_DATE,
            "starter_code": p.starter, "difficulty": p.difficulty,
            "public_test_cases": json.dumps(public), "private_test_cases": encode_private(private),
            "metadata": json.dumps({"func_name": p.func_name} if p.func_name else {}),
        })
    return rows


def reference_program(problem_id: str) -> str:
    """The reference solution of a `stdin-synth` problem id (`synth-03-reverse-words`)."""
    name = problem_id.split("-", 2)[2]
    return next(p.reference for p in PROBLEMS if p.name == name)


def write_jsonl(path, seed: int = 0) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in synth_rows(seed):
            f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    import sys

    write_jsonl(sys.argv[1])
