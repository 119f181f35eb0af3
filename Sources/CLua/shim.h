#ifndef HOOKBOT_CLUA_SHIM_H
#define HOOKBOT_CLUA_SHIM_H
/* Lua 5.4 C API for Swift. The API's function-like macros are not visible to
   Swift, so the ones the runtime needs are re-exposed as inline functions. */
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static inline int hb_lua_pcall(lua_State *L, int nargs, int nresults, int msgh) {
    return lua_pcall(L, nargs, nresults, msgh);
}
static inline int hb_lua_upvalueindex(int i) { return lua_upvalueindex(i); }
static inline int hb_lua_registryindex(void) { return LUA_REGISTRYINDEX; }
static inline int hb_luaL_dostring(lua_State *L, const char *s) { return luaL_dostring(L, s); }
static inline int hb_luaL_loadbuffer(lua_State *L, const char *buff, size_t sz, const char *name, const char *mode) {
    return luaL_loadbufferx(L, buff, sz, name, mode);
}

static inline void hb_getregistryref(lua_State *L, int ref) { lua_rawgeti(L, LUA_REGISTRYINDEX, ref); }
static inline int hb_ref(lua_State *L) { return luaL_ref(L, LUA_REGISTRYINDEX); }
static inline void hb_unref(lua_State *L, int ref) { luaL_unref(L, LUA_REGISTRYINDEX, ref); }

#endif
