#ifndef HOOKBOT_CLUA_SHIM_H
#define HOOKBOT_CLUA_SHIM_H
/* Lua 5.4 C API for Swift. The API's function-like macros are not visible to
   Swift, so the ones the runtime needs are re-exposed as inline functions. */
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---------------------------------------------------------------------------
   Sandboxed states with limits (HookRuntime).

   Every plugin state carries an hb_limits record (pointer in the state's extra
   space, also the allocator's userdata):
   - memory: a custom lua_Alloc counts the bytes of the state and refuses (NULL)
     any growth beyond `mem_cap` while `unlimited` is 0, so Lua raises "not
     enough memory" inside the plugin's call. `unlimited` is 1 whenever Swift
     code runs (building arguments, inside Swift callbacks) so that an API call
     made from Swift can never raise a memory error across Swift frames.
   - instructions / wall clock: a count hook adds the executed instructions and
     checks a monotonic deadline. Once tripped it re-arms itself with a count of
     1, so `pcall` inside the plugin cannot swallow the abort for long.
   - errors from Swift callbacks: Swift never calls lua_error. A Swift function
     returns a negative count with the message on top of the stack and the C
     trampoline below raises it after the Swift frame has returned.
   ------------------------------------------------------------------------- */

enum { HB_TRIP_NONE = 0, HB_TRIP_INSTRUCTIONS = 1, HB_TRIP_DEADLINE = 2, HB_TRIP_MEMORY = 3 };

typedef struct hb_limits {
    size_t mem_used;
    size_t mem_cap;
    size_t mem_peak;
    int unlimited;
    int tripped;
    long long instr_used;
    long long instr_budget;     /* <= 0: no budget */
    int count_step;
    double deadline;            /* monotonic seconds; <= 0: none */
    void *owner;                /* Swift object (unretained) */
} hb_limits;

static inline double hb_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *hb_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    hb_limits *lim = (hb_limits *)ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        lim->mem_used -= old;
        return NULL;
    }
    if (nsize > old && !lim->unlimited && lim->mem_cap > 0 &&
        lim->mem_used - old + nsize > lim->mem_cap) {
        lim->tripped = HB_TRIP_MEMORY;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p == NULL) return NULL;
    lim->mem_used = lim->mem_used - old + nsize;
    if (lim->mem_used > lim->mem_peak) lim->mem_peak = lim->mem_used;
    return p;
}

static inline hb_limits *hb_limits_of(lua_State *L) {
    return *(hb_limits **)lua_getextraspace(L);
}

static void hb_count_hook(lua_State *L, lua_Debug *ar) {
    hb_limits *lim = hb_limits_of(L);
    int step = lua_gethookcount(L);
    lim->instr_used += step;
    if (lim->tripped == HB_TRIP_NONE) {
        if (lim->instr_budget > 0 && lim->instr_used > lim->instr_budget) {
            lim->tripped = HB_TRIP_INSTRUCTIONS;
        } else if (lim->deadline > 0 && hb_monotonic() > lim->deadline) {
            lim->tripped = HB_TRIP_DEADLINE;
        } else {
            if (step != lim->count_step)
                lua_sethook(L, hb_count_hook, LUA_MASKCOUNT, lim->count_step);
            return;
        }
    }
    /* tripped: fire on every instruction from now on, then raise */
    lua_sethook(L, hb_count_hook, LUA_MASKCOUNT, 1);
    const char *what = lim->tripped == HB_TRIP_INSTRUCTIONS ? "instruction budget exceeded"
                     : lim->tripped == HB_TRIP_DEADLINE ? "deadline exceeded"
                     : "memory limit exceeded";
    int saved = lim->unlimited;
    lim->unlimited = 1; /* the message itself must be allocatable */
    lua_Debug d;
    if (lua_getstack(L, 0, &d) && lua_getinfo(L, "Sl", &d) && d.currentline > 0) {
        lua_pushfstring(L, "%s:%d: %s", d.short_src, d.currentline, what);
    } else {
        lua_pushstring(L, what);
    }
    lim->unlimited = saved;
    lua_error(L);
    (void)ar;
}

/* Creates a state with the counting allocator. Returns NULL on failure. */
static inline lua_State *hb_newstate(hb_limits *lim) {
    lim->unlimited = 1;
    lua_State *L = lua_newstate(hb_alloc, lim);
    if (L == NULL) return NULL;
    *(hb_limits **)lua_getextraspace(L) = lim;
    return L;
}

/* Arms the limits for one protected call and performs it. */
static inline int hb_limited_pcall(lua_State *L, int nargs, int nresults, double seconds, long long budget) {
    hb_limits *lim = hb_limits_of(L);
    lim->instr_used = 0;
    lim->instr_budget = budget;
    lim->deadline = seconds > 0 ? hb_monotonic() + seconds : 0;
    int wasTripped = lim->tripped;
    lim->tripped = HB_TRIP_NONE;
    if (wasTripped || lua_gethook(L) == NULL || lua_gethookcount(L) != lim->count_step)
        lua_sethook(L, hb_count_hook, LUA_MASKCOUNT, lim->count_step);
    lim->unlimited = 0;
    int status = lua_pcall(L, nargs, nresults, 0);
    lim->unlimited = 1;
    /* Time spent inside one C library call (e.g. pattern matching) is not seen
       by the count hook: a call that returns late still counts as a deadline
       failure, its results are discarded. */
    if (status == LUA_OK && lim->deadline > 0 && hb_monotonic() > lim->deadline) {
        lim->tripped = HB_TRIP_DEADLINE;
        lua_pushstring(L, "deadline exceeded (inside a library call)");
        status = LUA_ERRRUN;
    }
    /* outside a call any stray Lua code (finalizers) is aborted at once */
    lim->deadline = 1e-9;
    return status;
}

typedef int (*hb_swift_fn)(lua_State *L);

static int hb_trampoline(lua_State *L) {
    hb_swift_fn f = (hb_swift_fn)lua_touserdata(L, lua_upvalueindex(1));
    hb_limits *lim = hb_limits_of(L);
    int saved = lim->unlimited;
    lim->unlimited = 1;
    int n = f(L);
    /* What the Swift function allocated was not refused (no memory error may cross Swift frames), but it
       counts: a state over its cap once the call returns (after a full collection) fails here, and keeps
       failing until the plugin's call ends. */
    if (n >= 0 && !saved && lim->mem_cap > 0 && lim->mem_used > lim->mem_cap) {
        lua_gc(L, LUA_GCCOLLECT);
        if (lim->mem_used > lim->mem_cap) {
            lua_settop(L, lua_gettop(L) - n);
            lim->tripped = HB_TRIP_MEMORY;
            lua_sethook(L, hb_count_hook, LUA_MASKCOUNT, 1);
            lua_pushstring(L, "memory limit exceeded (by a value the host returned)");
            n = -1;
        }
    }
    lim->unlimited = saved;
    if (n < 0) return lua_error(L);
    return n;
}

/* Pushes a Lua function that calls the Swift function `f`. */
static inline void hb_push_swift_function(lua_State *L, hb_swift_fn f) {
    lua_pushlightuserdata(L, (void *)f);
    lua_pushcclosure(L, hb_trampoline, 1);
}

/* Pushes a closure over `f` with the `nup` values on top of the stack as
   upvalues 2..nup+1 (upvalue 1 is the Swift function). */
static inline void hb_push_swift_closure(lua_State *L, hb_swift_fn f, int nup) {
    lua_pushlightuserdata(L, (void *)f);
    lua_insert(L, -(nup + 1));
    lua_pushcclosure(L, hb_trampoline, nup + 1);
}

static inline void hb_open_safe_libs(lua_State *L) {
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_COLIBNAME, luaopen_coroutine, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 1); lua_pop(L, 1);
}

static inline void hb_getregistryref(lua_State *L, int ref) { lua_rawgeti(L, LUA_REGISTRYINDEX, ref); }
static inline int hb_ref(lua_State *L) { return luaL_ref(L, LUA_REGISTRYINDEX); }
static inline void hb_unref(lua_State *L, int ref) { luaL_unref(L, LUA_REGISTRYINDEX, ref); }

#endif
