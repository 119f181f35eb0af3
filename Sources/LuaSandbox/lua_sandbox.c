/* The sandbox's limits, in C because they run inside Lua's own calls: the
   counting allocator, the instruction and deadline hook, and the trampoline
   through which Swift functions raise Lua errors without a longjmp crossing
   Swift frames. See lua_sandbox.h. */

#include "lua_sandbox.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <time.h>

static void hb_count_hook(lua_State *L, lua_Debug *ar);

static double hb_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned long long hb_monotonic_nanos(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* Arms the deadline `seconds` from now (none when <= 0); returns now, in nanoseconds. */
static unsigned long long hb_arm_deadline(hb_limits *lim, double seconds) {
    unsigned long long now = hb_monotonic_nanos();
    lim->deadline = seconds > 0 ? (double)now * 1e-9 + seconds : 0;
    return now;
}

/* After a limited call that started at `started`: records its duration and tells whether it ended past
   its deadline (time spent inside one C library call is not seen by the count hook). */
static int hb_finish_call(hb_limits *lim, unsigned long long started) {
    unsigned long long now = hb_monotonic_nanos();
    lim->last_nanos = now - started;
    return lim->deadline > 0 && (double)now * 1e-9 > lim->deadline;
}

/* The block cache. A hook call allocates a few small blocks (the message table, its hash part, `attrs`) and
   the incremental collector's sweep frees them by the hundred: glibc keeps 7 freed blocks per size for
   the thread (tcache), so most went through its slower paths (_int_free, _int_malloc: about 700 of the
   5,300 instructions of a C loop doing what a trivial hook call does, under callgrind). A per-state list
   per 16-byte class takes and gives back a block in a few instructions. Every block of up to
   HB_CACHE_MAX_BLOCK bytes is allocated with its size rounded up to its class, so any block of a class
   fits any request of it. The cache holds at most half the state's own memory, within 32-256 KB (memory
   glibc would mostly keep in its own free lists too); it is not counted in mem_used, so the memory cap
   counts exactly what Lua holds, as before. */
#define HB_CACHE_MAX_BLOCK (HB_BLOCK_CACHE_CLASSES * 16)
#define HB_CLASS(size) (((size) + 15) >> 4)

static size_t hb_cache_room(const hb_limits *lim) {
    size_t room = lim->mem_used / 2;
    if (room < 32 * 1024) room = 32 * 1024;
    if (room > 256 * 1024) room = 256 * 1024;
    return room;
}

static void hb_free_block(hb_limits *lim, void *ptr, size_t size) {
    if (size <= HB_CACHE_MAX_BLOCK) {
        size_t c = HB_CLASS(size);
        if (lim->cached_bytes + (c << 4) <= hb_cache_room(lim)) {
            *(void **)ptr = lim->free_blocks[c];
            lim->free_blocks[c] = ptr;
            lim->cached_bytes += c << 4;
            return;
        }
    }
    free(ptr);
}

static void *hb_resize_block(hb_limits *lim, void *ptr, size_t old, size_t nsize) {
    if (nsize > HB_CACHE_MAX_BLOCK) return realloc(ptr, nsize);
    size_t c = HB_CLASS(nsize);
    if (ptr == NULL) {
        void *p = lim->free_blocks[c];
        if (p != NULL) {
            lim->free_blocks[c] = *(void **)p;
            lim->cached_bytes -= c << 4;
            return p;
        }
        return malloc(c << 4);
    }
    if (old <= HB_CACHE_MAX_BLOCK && HB_CLASS(old) == c) return ptr; /* it has room already */
    return realloc(ptr, c << 4);
}

static void hb_drain_blocks(hb_limits *lim) {
    for (int c = 0; c <= HB_BLOCK_CACHE_CLASSES; c++) {
        while (lim->free_blocks[c] != NULL) {
            void *p = lim->free_blocks[c];
            lim->free_blocks[c] = *(void **)p;
            free(p);
        }
    }
    lim->cached_bytes = 0;
}

static void *hb_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    hb_limits *lim = (hb_limits *)ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        if (ptr != NULL) hb_free_block(lim, ptr, old);
        lim->mem_used -= old;
        return NULL;
    }
    if (nsize > old && !lim->unlimited && lim->mem_cap > 0 &&
        lim->mem_used - old + nsize > lim->mem_cap) {
        lim->tripped = HB_TRIP_MEMORY;
        return NULL;
    }
    void *p = hb_resize_block(lim, ptr, old, nsize);
    if (p == NULL) return NULL;
    lim->mem_used = lim->mem_used - old + nsize;
    if (lim->mem_used > lim->mem_peak) lim->mem_peak = lim->mem_used;
    return p;
}

hb_limits *hb_limits_of(lua_State *L) {
    return *(hb_limits **)lua_getextraspace(L);
}

void hb_close(lua_State *L) {
    hb_limits *lim = hb_limits_of(L);
    lua_close(L);
    hb_drain_blocks(lim);
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

/* The keys of a message table, in the order hb_push_message sets them (indices into the registry's
   array of interned keys). */
enum { K_ID = 1, K_CID, K_FROM, K_TYPE, K_TYPE_NAME, K_TEXT, K_ATTRS, K_FILE, K_LOCATION, K_TIMESTAMP, K_TRANSIENT,
       K_BINARY, K_COUNT = K_BINARY };
static const char *const hb_message_key_names[K_COUNT] = {
    "id", "cid", "from", "type", "type_name", "text", "attrs", "file", "location", "timestamp", "transient", "binary"};

lua_State *hb_newstate(hb_limits *lim) {
    lim->unlimited = 1;
    lua_State *L = lua_newstate(hb_alloc, lim);
    if (L == NULL) {
        hb_drain_blocks(lim);
        return NULL;
    }
    *(hb_limits **)lua_getextraspace(L) = lim;
    lua_createtable(L, K_COUNT, 0);
    for (int i = 0; i < K_COUNT; i++) {
        lua_pushstring(L, hb_message_key_names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lim->message_keys = luaL_ref(L, LUA_REGISTRYINDEX);
    return L;
}

/* Written in C because it is the larger part of a hook call (a fresh table per call, since plugins may keep
   `msg`): keys interned once and raw sets save a string-cache lookup and a metatable check per field over
   lua_setfield, and one call from Swift replaces a dozen. */
void hb_push_message(lua_State *L, int present, lua_Integer type, lua_Integer timestamp, int transient) {
    int count = 3;
    for (int bit = HB_MSG_TYPE_NAME; bit <= HB_MSG_BINARY; bit <<= 1)
        if (present & bit) count++;
    int v = lua_gettop(L) - count + 1; /* the first value */
    lua_checkstack(L, 4);
    lua_createtable(L, 0, 12);
    int t = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, hb_limits_of(L)->message_keys);
    int k = t + 1;
#define HB_SET_VALUE(key, idx) (lua_rawgeti(L, k, key), lua_pushvalue(L, idx), lua_rawset(L, t))
    HB_SET_VALUE(K_ID, v);
    HB_SET_VALUE(K_CID, v + 1);
    HB_SET_VALUE(K_FROM, v + 2);
    int next = v + 3;
    lua_rawgeti(L, k, K_TYPE);
    lua_pushinteger(L, type);
    lua_rawset(L, t);
    if (present & HB_MSG_TYPE_NAME) HB_SET_VALUE(K_TYPE_NAME, next++);
    if (present & HB_MSG_TEXT) HB_SET_VALUE(K_TEXT, next++);
    if (present & HB_MSG_ATTRS) {
        HB_SET_VALUE(K_ATTRS, next++);
    } else {
        lua_rawgeti(L, k, K_ATTRS);
        lua_createtable(L, 0, 0);
        lua_rawset(L, t);
    }
    if (present & HB_MSG_FILE) HB_SET_VALUE(K_FILE, next++);
    if (present & HB_MSG_LOCATION) HB_SET_VALUE(K_LOCATION, next++);
    lua_rawgeti(L, k, K_TIMESTAMP);
    lua_pushinteger(L, timestamp);
    lua_rawset(L, t);
    lua_rawgeti(L, k, K_TRANSIENT);
    lua_pushboolean(L, transient);
    lua_rawset(L, t);
    if (present & HB_MSG_BINARY) HB_SET_VALUE(K_BINARY, next++);
#undef HB_SET_VALUE
    lua_settop(L, t);   /* the keys */
    lua_replace(L, v);  /* the table where the first value was */
    lua_settop(L, v);
}

int hb_limited_pcall(lua_State *L, int nargs, int nresults, double seconds, long long budget) {
    hb_limits *lim = hb_limits_of(L);
    lim->instr_used = 0;
    lim->instr_budget = budget;
    unsigned long long started = hb_arm_deadline(lim, seconds);
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
    if (hb_finish_call(lim, started) && status == LUA_OK) {
        lim->tripped = HB_TRIP_DEADLINE;
        lua_pushstring(L, "deadline exceeded (inside a library call)");
        status = LUA_ERRRUN;
    }
    /* outside a call any stray Lua code (finalizers) is aborted at once */
    lim->deadline = 1e-9;
    return status;
}

/* The same limits for one step of a coroutine (a hook that may wait in ctx.ask): the budget and the
   deadline start afresh for each resume, and the count hook is set on the coroutine itself, since
   lua_sethook is per thread. The memory cap is the state's, shared by all its threads. */
int hb_limited_resume(lua_State *co, lua_State *from, int nargs, int *nresults, double seconds, long long budget) {
    hb_limits *lim = hb_limits_of(co);
    lim->instr_used = 0;
    lim->instr_budget = budget;
    unsigned long long started = hb_arm_deadline(lim, seconds);
    int wasTripped = lim->tripped;
    lim->tripped = HB_TRIP_NONE;
    if (wasTripped || lua_gethook(co) == NULL || lua_gethookcount(co) != lim->count_step)
        lua_sethook(co, hb_count_hook, LUA_MASKCOUNT, lim->count_step);
    lim->unlimited = 0;
    int status = lua_resume(co, from, nargs, nresults);
    lim->unlimited = 1;
    if (hb_finish_call(lim, started) && (status == LUA_OK || status == LUA_YIELD)) {
        lim->tripped = HB_TRIP_DEADLINE;
        lua_settop(co, 0);
        lua_pushstring(co, "deadline exceeded (inside a library call)");
        status = LUA_ERRRUN;
    }
    lim->deadline = 1e-9;
    return status;
}

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

void hb_push_swift_function(lua_State *L, hb_swift_fn f) {
    lua_pushlightuserdata(L, (void *)f);
    lua_pushcclosure(L, hb_trampoline, 1);
}

void hb_push_swift_closure(lua_State *L, hb_swift_fn f, int nup) {
    lua_pushlightuserdata(L, (void *)f);
    lua_insert(L, -(nup + 1));
    lua_pushcclosure(L, hb_trampoline, nup + 1);
}

void hb_open_safe_libs(lua_State *L) {
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_COLIBNAME, luaopen_coroutine, 1); lua_pop(L, 1);
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 1); lua_pop(L, 1);
}
