# pyprog.py - a small deterministic Python workload for profiler fixtures.
# SPDX-License-Identifier: MIT OR Apache-2.0


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


class WordCounter:
    def __init__(self):
        self.counts = {}

    def add(self, word):
        self.counts[word] = self.counts.get(word, 0) + 1

    def top(self, k):
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def make_words(n):
    letters = "etaoinshr"
    words = []
    x = 1
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        words.append(letters[x % 9] + letters[(x // 9) % 9] + letters[(x // 81) % 3])
    return words


def main():
    wc = WordCounter()
    for w in make_words(300):
        wc.add(w)
    evens = sum(1 for i in range(60) if is_even(i))
    print("fib(15) =", fib(15))
    print("evens =", evens)
    print("top =", wc.top(3))


if __name__ == "__main__":
    main()
