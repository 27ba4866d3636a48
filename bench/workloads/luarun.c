/* Runs a Lua script: the smallest host of the Lua library, for the gprof
   corpus (bench/corpus.sh); lua-src ships the library without lua.c. */
#include <stdio.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: luarun SCRIPT\n");
        return 2;
    }
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    if (luaL_dofile(L, argv[1]) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    return 0;
}
