/* A tiny program for the stack fixtures: self work at two depths and a
   self recursion, so that stacks differ in more than their leaf. */
#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noinline)) long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
__attribute__((noinline)) long leaf(long n) { return spin(n / 2) + spin(n / 4); }
__attribute__((noinline)) long rec(int d, long n) { long s = spin(n / 8); return d ? s + rec(d - 1, n) : s + leaf(n); }
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 4000;
  long t = 0;
  for (long i = 0; i < n; i++) { t += rec(3, 20000); t += leaf(30000); }
  sink = t; printf("%ld\n", t); return 0;
}
