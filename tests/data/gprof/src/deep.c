/* deep.c - gprof fixture: deep recursion and a long chain of functions.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 *   - descend(): self recursion 10000 calls deep (not a tail call);
 *   - ping() <-> pong(): mutual recursion 10000 calls deep (a cycle of 2
 *     whose every call is a recursive one);
 *   - chain_00() -> chain_01() -> ... -> chain_99() -> leaf(): a chain of
 *     100 distinct functions, so the call graph is 100 levels deep;
 *   - step(): a small helper called from every level of everything above.
 *
 * Usage: deep [DEPTH]   (default 10000).  Deterministic.
 */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;

NOINLINE unsigned long step(unsigned long x, int rounds)
{
    for (int i = 0; i < rounds; i++)
        x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdUL + (unsigned long)i;
    return x;
}

NOINLINE unsigned long leaf(unsigned long x)
{
    return step(x, 400);
}

/* ---- self recursion, DEPTH deep --------------------------------------- */
NOINLINE unsigned long descend(unsigned depth)
{
    unsigned long x = depth;
    for (int i = 0; i < 60; i++)          /* own work at every level */
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    if (depth == 0)
        return leaf(x);
    unsigned long below = descend(depth - 1);   /* used after: not a tail call */
    return step(below ^ x, 20);
}

/* ---- mutual recursion, DEPTH deep -------------------------------------- */
NOINLINE unsigned long pong(unsigned depth);

NOINLINE unsigned long ping(unsigned depth)
{
    if (depth == 0)
        return leaf(1);
    unsigned long r = pong(depth - 1);
    return step(r + depth, 30);
}

NOINLINE unsigned long pong(unsigned depth)
{
    if (depth == 0)
        return leaf(2);
    unsigned long r = ping(depth - 1);
    return (r ^ depth) * 3 + 1;
}

/* ---- a chain of 100 distinct functions --------------------------------- */
/* LINK(f, g): f calls g once and works on the result (not a tail call).
 * Written from the end of the chain so that no prototypes are needed. */
#define LINK(f, g)                                   \
    NOINLINE unsigned long f(unsigned long x)        \
    {                                                \
        unsigned long r = g(step(x, 8));             \
        return r * 3 + 1;                            \
    }

LINK(chain_99, leaf)
LINK(chain_98, chain_99)
LINK(chain_97, chain_98)
LINK(chain_96, chain_97)
LINK(chain_95, chain_96)
LINK(chain_94, chain_95)
LINK(chain_93, chain_94)
LINK(chain_92, chain_93)
LINK(chain_91, chain_92)
LINK(chain_90, chain_91)
LINK(chain_89, chain_90)
LINK(chain_88, chain_89)
LINK(chain_87, chain_88)
LINK(chain_86, chain_87)
LINK(chain_85, chain_86)
LINK(chain_84, chain_85)
LINK(chain_83, chain_84)
LINK(chain_82, chain_83)
LINK(chain_81, chain_82)
LINK(chain_80, chain_81)
LINK(chain_79, chain_80)
LINK(chain_78, chain_79)
LINK(chain_77, chain_78)
LINK(chain_76, chain_77)
LINK(chain_75, chain_76)
LINK(chain_74, chain_75)
LINK(chain_73, chain_74)
LINK(chain_72, chain_73)
LINK(chain_71, chain_72)
LINK(chain_70, chain_71)
LINK(chain_69, chain_70)
LINK(chain_68, chain_69)
LINK(chain_67, chain_68)
LINK(chain_66, chain_67)
LINK(chain_65, chain_66)
LINK(chain_64, chain_65)
LINK(chain_63, chain_64)
LINK(chain_62, chain_63)
LINK(chain_61, chain_62)
LINK(chain_60, chain_61)
LINK(chain_59, chain_60)
LINK(chain_58, chain_59)
LINK(chain_57, chain_58)
LINK(chain_56, chain_57)
LINK(chain_55, chain_56)
LINK(chain_54, chain_55)
LINK(chain_53, chain_54)
LINK(chain_52, chain_53)
LINK(chain_51, chain_52)
LINK(chain_50, chain_51)
LINK(chain_49, chain_50)
LINK(chain_48, chain_49)
LINK(chain_47, chain_48)
LINK(chain_46, chain_47)
LINK(chain_45, chain_46)
LINK(chain_44, chain_45)
LINK(chain_43, chain_44)
LINK(chain_42, chain_43)
LINK(chain_41, chain_42)
LINK(chain_40, chain_41)
LINK(chain_39, chain_40)
LINK(chain_38, chain_39)
LINK(chain_37, chain_38)
LINK(chain_36, chain_37)
LINK(chain_35, chain_36)
LINK(chain_34, chain_35)
LINK(chain_33, chain_34)
LINK(chain_32, chain_33)
LINK(chain_31, chain_32)
LINK(chain_30, chain_31)
LINK(chain_29, chain_30)
LINK(chain_28, chain_29)
LINK(chain_27, chain_28)
LINK(chain_26, chain_27)
LINK(chain_25, chain_26)
LINK(chain_24, chain_25)
LINK(chain_23, chain_24)
LINK(chain_22, chain_23)
LINK(chain_21, chain_22)
LINK(chain_20, chain_21)
LINK(chain_19, chain_20)
LINK(chain_18, chain_19)
LINK(chain_17, chain_18)
LINK(chain_16, chain_17)
LINK(chain_15, chain_16)
LINK(chain_14, chain_15)
LINK(chain_13, chain_14)
LINK(chain_12, chain_13)
LINK(chain_11, chain_12)
LINK(chain_10, chain_11)
LINK(chain_09, chain_10)
LINK(chain_08, chain_09)
LINK(chain_07, chain_08)
LINK(chain_06, chain_07)
LINK(chain_05, chain_06)
LINK(chain_04, chain_05)
LINK(chain_03, chain_04)
LINK(chain_02, chain_03)
LINK(chain_01, chain_02)
LINK(chain_00, chain_01)

int main(int argc, char **argv)
{
    unsigned depth = 10000;
    if (argc > 1)
        depth = (unsigned)strtoul(argv[1], NULL, 10);
    if (depth == 0 || depth > 100000) {
        fprintf(stderr, "usage: deep [DEPTH 1..100000]\n");
        return 2;
    }

    unsigned long acc = 0;
    for (unsigned r = 0; r < 900; r++) {
        acc += descend(depth);
        acc ^= ping(depth);
    }
    for (unsigned long r = 0; r < 60000; r++)
        acc += chain_00(acc + r);

    sink = acc;
    printf("deep: %lu\n", acc);
    return 0;
}
