// demangle.cpp - gprof fixture for C++ names (gprof -b vs --no-demangle).
// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Namespaced functions, class and function templates (with type and
// non-type parameters), overloads, operators, virtual functions, an
// anonymous namespace, a lambda, and std::sort / std::vector code
// instantiated in this file.  Deterministic.  Usage: demangle [ROUNDS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define NOINLINE __attribute__((noinline))

namespace fixture {
namespace geo {

template <typename T>
struct Vec3 {
    T x, y, z;
    NOINLINE T dot(const Vec3 &o) const { return x * o.x + y * o.y + z * o.z; }
    NOINLINE Vec3 operator+(const Vec3 &o) const { return {x + o.x, y + o.y, z + o.z}; }
};

// a function template with a type and a non-type parameter
template <typename T, int N>
NOINLINE T poly(T x)
{
    T r = 0;
    for (int i = 0; i < N; i++)
        r = r * x + static_cast<T>(i + 1);
    return r;
}

} // namespace geo

class Shape {
public:
    virtual ~Shape() {}
    virtual double area(int steps) const = 0;
};

class Circle : public Shape {
public:
    explicit Circle(double r) : r_(r) {}
    NOINLINE double area(int steps) const override
    {
        double s = 0; // midpoint rule on a quarter circle, on purpose slow
        for (int i = 0; i < steps; i++) {
            double x = (i + 0.5) / steps;
            double y2 = 1.0 - x * x;
            double y = y2; // a few Newton steps for sqrt
            for (int k = 0; k < 6; k++)
                y = 0.5 * (y + y2 / (y > 0 ? y : 1));
            s += y;
        }
        return 4.0 * s / steps * r_ * r_;
    }

private:
    double r_;
};

class Square : public Shape {
public:
    explicit Square(double a) : a_(a) {}
    NOINLINE double area(int steps) const override
    {
        double s = 0;
        for (int i = 0; i < steps; i++)
            s += a_ * a_ / steps;
        return s;
    }

private:
    double a_;
};

// overloads
NOINLINE long scale(long v) { return v * 3 + 1; }
NOINLINE double scale(double v) { return v * 1.5 + 0.25; }

} // namespace fixture

namespace {

// anonymous namespace: (anonymous namespace)::spin(unsigned int)
NOINLINE unsigned spin(unsigned n)
{
    unsigned h = 2166136261u;
    for (unsigned i = 0; i < n; i++)
        h = (h ^ i) * 16777619u;
    return h;
}

struct ByLowBits {
    bool operator()(unsigned a, unsigned b) const { return (a & 0xffff) < (b & 0xffff); }
};

} // namespace

int main(int argc, char **argv)
{
    unsigned rounds = 100;
    if (argc > 1)
        rounds = static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10));
    if (rounds == 0 || rounds > 10000) {
        std::fprintf(stderr, "usage: demangle [ROUNDS 1..10000]\n");
        return 2;
    }

    using fixture::geo::Vec3;
    double total = 0;
    long ltotal = 0;
    fixture::Circle circle(1.0);
    fixture::Square square(2.0);
    const fixture::Shape *shapes[] = {&circle, &square};

    auto weigh = [&ltotal](int i) NOINLINE { ltotal += fixture::scale(static_cast<long>(i)); };

    std::vector<unsigned> v(200000);
    for (unsigned r = 0; r < rounds; r++) {
        Vec3<double> a{1.0 * r, 2.0, 3.0}, b{0.5, 0.25, 0.125};
        Vec3<int> ia{static_cast<int>(r), 2, 3}, ib{4, 5, 6};
        for (int i = 0; i < 2000; i++) {
            a = a + b;
            total += a.dot(b) * 1e-9;
            ltotal += (ia + ib).dot(ib);
            total += fixture::geo::poly<double, 8>(1.0001);
            ltotal += fixture::geo::poly<long, 5>(i);
            total += fixture::scale(0.001 * i);
            weigh(i);
        }
        for (const fixture::Shape *s : shapes)
            total += s->area(200000);
        for (unsigned i = 0; i < v.size(); i++)
            v[i] = spin(i % 64 + r);
        std::sort(v.begin(), v.end(), ByLowBits());
        ltotal += v[v.size() / 2];
    }
    std::printf("demangle: %.6f %ld\n", total, ltotal);
    return 0;
}
