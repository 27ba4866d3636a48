<?php
// phpprog.php - a small deterministic PHP workload for Xdebug fixtures.
// SPDX-License-Identifier: MIT OR Apache-2.0

function fib(int $n): int
{
    return $n < 2 ? $n : fib($n - 1) + fib($n - 2);
}

function is_even(int $n): bool { return $n == 0 ? true : is_odd($n - 1); }
function is_odd(int $n): bool { return $n == 0 ? false : is_even($n - 1); }

class Counter
{
    private array $counts = [];

    public function add(string $w): void
    {
        $this->counts[$w] = ($this->counts[$w] ?? 0) + 1;
    }

    public function distinct(): int
    {
        return count($this->counts);
    }
}

$c = new Counter();
for ($i = 0; $i < 60; $i++) {
    $c->add(substr(md5((string)($i % 37)), 0, 3));
}
$evens = 0;
for ($i = 0; $i < 40; $i++) {
    if (is_even($i)) {
        $evens++;
    }
}
printf("fib(10) = %d\n", fib(10));
printf("evens = %d\n", $evens);
printf("distinct = %d\n", $c->distinct());
$words = ['pear', 'apple', 'fig'];
usort($words, 'strcmp');
printf("sorted = %s\n", implode(',', $words));
