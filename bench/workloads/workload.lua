-- A Lua workload for the gprof corpus (bench/corpus.sh): table sorting,
-- string building and matching, recursion.
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 200000 do t[i] = tostring(i) .. "x" end
table.sort(t)
local s = 0
for i = 1, 30 do s = s + fib(24) end
local parts = {}
for i = 1, 100000 do parts[#parts+1] = string.format("%d:%s", i, t[(i % #t) + 1]) end
local str = table.concat(parts, ",")
local count = 0
for w in string.gmatch(str, "%d+") do count = count + 1 end
print(s, count, #str)
