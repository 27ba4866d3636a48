#!/usr/bin/perl
# plprog.pl - a small deterministic Perl workload for NYTProf fixtures.
# SPDX-License-Identifier: MIT OR Apache-2.0
use strict;
use warnings;

sub fib {
    my ($n) = @_;
    return $n < 2 ? $n : fib($n - 1) + fib($n - 2);
}

sub is_even { my ($n) = @_; return $n == 0 ? 1 : is_odd($n - 1); }
sub is_odd  { my ($n) = @_; return $n == 0 ? 0 : is_even($n - 1); }

sub word_counts {
    my ($k) = @_;
    my %c;
    for my $i (1 .. 200) {
        my $w = join '', map { chr(97 + ($i * $_ * 7 + $k) % 5) } 1 .. 3;
        $c{$w}++;
    }
    return \%c;
}

my $c = word_counts(3);
my $evens = grep { is_even($_) } 0 .. 50;
printf "fib(14) = %d\n", fib(14);
printf "evens = %d\n", $evens;
printf "distinct words = %d\n", scalar keys %$c;
