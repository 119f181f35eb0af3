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
static inline void hb_lua_pop(lua_State *L, int n) { lua_pop(L, n); }
static inline void hb_lua_newtable(lua_State *L) { lua_newtable(L); }
static inline const char *hb_lua_tostring(lua_State *L, int idx) { return lua_tolstring(L, idx, NULL); }
static inline lua_Number hb_lua_tonumber(lua_State *L, int idx) { return lua_tonumberx(L, idx, NULL); }
static inline lua_Integer hb_lua_tointeger(lua_State *L, int idx) { return lua_tointegerx(L, idx, NULL); }
static inline int hb_lua_isnil(lua_State *L, int idx) { return lua_isnil(L, idx); }
static inline int hb_lua_istable(lua_State *L, int idx) { return lua_istable(L, idx); }
static inline int hb_lua_isfunction(lua_State *L, int idx) { return lua_isfunction(L, idx); }
static inline void hb_lua_pushcfunction(lua_State *L, lua_CFunction f) { lua_pushcfunction(L, f); }
static inline void hb_lua_register(lua_State *L, const char *name, lua_CFunction f) { lua_register(L, name, f); }
static inline int hb_lua_upvalueindex(int i) { return lua_upvalueindex(i); }
static inline int hb_lua_registryindex(void) { return LUA_REGISTRYINDEX; }
static inline void hb_lua_insert(lua_State *L, int idx) { lua_insert(L, idx); }
static inline void hb_lua_remove(lua_State *L, int idx) { lua_remove(L, idx); }
static inline void hb_lua_replace(lua_State *L, int idx) { lua_replace(L, idx); }
static inline int hb_luaL_dostring(lua_State *L, const char *s) { return luaL_dostring(L, s); }
static inline int hb_luaL_loadbuffer(lua_State *L, const char *buff, size_t sz, const char *name, const char *mode) {
    return luaL_loadbufferx(L, buff, sz, name, mode);
}
static inline void *hb_lua_getextraspace(lua_State *L) { return lua_getextraspace(L); }
static inline int hb_lua_yield(lua_State *L, int n) { return lua_yield(L, n); }

#endif
