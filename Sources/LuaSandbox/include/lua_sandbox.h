#ifndef HOOKBOT_LUA_SANDBOX_H
#define HOOKBOT_LUA_SANDBOX_H

#include <lua.h>
#include <stddef.h>

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

/* Blocks of up to 32 * 16 = 512 bytes are cached per state (hb_alloc). */
#define HB_BLOCK_CACHE_CLASSES 32

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
    unsigned long long last_nanos; /* how long the last hb_limited_pcall / hb_limited_resume took */
    int message_keys;           /* registry ref of the message tables' keys (hb_push_message) */
    /* Freed blocks of up to HB_BLOCK_CACHE_CLASSES * 16 bytes kept for reuse, one list per 16-byte class
       (lua_sandbox.c, hb_alloc); they are not in mem_used. hb_close frees them. */
    void *free_blocks[HB_BLOCK_CACHE_CLASSES + 1];
    size_t cached_bytes;
} hb_limits;

/* A Swift function callable from Lua: returns its result count, or a negative
   count with the error message on top of the stack. */
typedef int (*hb_swift_fn)(lua_State *L);

/* Creates a state with the counting allocator. Returns NULL on failure. */
lua_State *hb_newstate(hb_limits *lim);

/* Closes a state made by hb_newstate (lua_close) and frees the blocks its allocator kept for reuse. */
void hb_close(lua_State *L);

/* The limits record of a state made by hb_newstate. */
hb_limits *hb_limits_of(lua_State *L);

/* Arms the limits for one protected call and performs it. Its duration is left in `last_nanos` (the two
   clock reads that arm and check the deadline measure it, so that callers need not read the clock again). */
int hb_limited_pcall(lua_State *L, int nargs, int nresults, double seconds, long long budget);

/* Arms the limits for one step of the coroutine `co` and resumes it (lua_resume). A coroutine that
   yielded but ran past its deadline inside a library call is reported as an error (LUA_ERRRUN). */
int hb_limited_resume(lua_State *co, lua_State *from, int nargs, int *nresults, double seconds, long long budget);

/* Pushes a Lua function that calls the Swift function `f`. */
void hb_push_swift_function(lua_State *L, hb_swift_fn f);

/* Pushes a closure over `f` with the `nup` values on top of the stack as
   upvalues 2..nup+1 (upvalue 1 is the Swift function). */
void hb_push_swift_closure(lua_State *L, hb_swift_fn f, int nup);

/* What hb_push_message finds on the stack besides id, cid and from (flags of `present`). */
enum {
    HB_MSG_TYPE_NAME = 1, HB_MSG_TEXT = 2, HB_MSG_ATTRS = 4, HB_MSG_FILE = 8, HB_MSG_LOCATION = 16, HB_MSG_BINARY = 32
};

/* Builds the message table a hook gets (`msg`, docs/PLUGINS.md "Messages") from the values on top of the
   stack, pushed in this order: id, cid, from, then those `present` names: type_name, text, attrs (a table),
   file (a table), location (a table), binary. Pops them and pushes the new table, with `type`, `timestamp`,
   `transient` and, without HB_MSG_ATTRS, a new empty `attrs`. The keys are strings interned once per state
   (kept in the registry), set with raw sets in the order the fields are listed here. */
void hb_push_message(lua_State *L, int present, lua_Integer type, lua_Integer timestamp, int transient);

/* Opens the libraries plugins may use (the sandbox removes what they may not). */
void hb_open_safe_libs(lua_State *L);

#endif
