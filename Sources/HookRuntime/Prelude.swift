/// Lua code run in every fresh plugin state before the plugin itself. It
/// builds the sandbox environment from a whitelist and the `ctx` table on top
/// of the raw Swift functions in `hb`. Its chunk name is "=(hookbot)"; error
/// positions skip its frames.
let hookbotPrelude = #"""
local hb, G = ...
local type, error, pairs, ipairs, tostring, select = G.type, G.error, G.pairs, G.ipairs, G.tostring, G.select
local raw_load, setmetatable, getmetatable, cg = G.load, G.setmetatable, G.getmetatable, G.collectgarbage
local concat = G.table.concat
-- errors raised here carry the position of the innermost plugin frame
local function fail(msg) error(hb.where() .. msg, 0) end

local function copy(t, skip)
  local r = {}
  for k, v in pairs(t) do
    if not (skip and skip[k]) then r[k] = v end
  end
  return r
end

-- The sandbox environment: an explicit whitelist.
local env = {}
for _, k in ipairs({ "assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget",
                     "rawlen", "rawset", "select", "tonumber", "tostring", "type", "_VERSION" }) do
  env[k] = G[k]
end
local nodump = { dump = true }
env.string = copy(G.string, nodump)
env.table = copy(G.table)
env.math = copy(G.math)
env.utf8 = copy(G.utf8)
env.coroutine = copy(G.coroutine)
env.os = { time = G.os.time, clock = G.os.clock, date = G.os.date, difftime = G.os.difftime }
env._G = env

-- Lua runs finalizers with debug hooks off, and code that runs while an error
-- raised by the limit hook unwinds (message handlers, __close of a coroutine
-- killed by a limit) also runs with hooks off, so none of them could be
-- stopped. Hence: no __gc / __close metamethods (the metatable installed is a
-- raw copy, so they cannot be added later) and message handlers run after
-- unwinding.
local raw_next, raw_pcall, pack, unpack = G.next, G.pcall, G.table.pack, G.table.unpack
local originals = setmetatable({}, { __mode = "k" })
env.setmetatable = function(t, mt)
  if type(t) ~= "table" then fail("setmetatable: table expected, got " .. type(t)) end
  if mt ~= nil then
    if type(mt) ~= "table" then fail("setmetatable: metatable must be a table or nil") end
    if G.rawget(mt, "__gc") ~= nil or G.rawget(mt, "__close") ~= nil then
      fail("setmetatable: __gc and __close metamethods are not allowed in plugins")
    end
    local c = {}
    for k, v in raw_next, mt do c[k] = v end
    originals[c] = mt
    mt = c
  end
  return setmetatable(t, mt)
end
env.getmetatable = function(v)
  local m = getmetatable(v)
  if type(m) == "table" then return originals[m] or m end
  return m
end
env.xpcall = function(f, handler, ...)
  if type(handler) ~= "function" then fail("xpcall: message handler must be a function") end
  local r = pack(raw_pcall(f, ...))
  if r[1] then return unpack(r, 1, r.n) end
  return false, handler(r[2])
end

-- Strings get their methods from a private copy; the metatable is hidden.
local smt = getmetatable("")
smt.__index = copy(G.string, nodump)
smt.__metatable = false

env.load = function(chunk, name, mode, e)
  if type(chunk) ~= "string" then fail("load: only source strings are allowed") end
  if e == nil then e = env end
  return raw_load(chunk, name, "t", e)
end

env.collectgarbage = function(opt, ...)
  opt = opt or "collect"
  if opt == "collect" or opt == "count" or opt == "step" or opt == "isrunning" then return cg(opt, ...) end
  fail("collectgarbage: option '" .. tostring(opt) .. "' is not allowed")
end

env.print = function(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  hb.log("info", concat(parts, "\t"))
end

local loaded = {}
env.require = function(name)
  if type(name) ~= "string" then fail("require: module name must be a string") end
  local v = loaded[name]
  if v ~= nil then return v end
  local src, chunkname = hb.require_source(name)
  local f, err = raw_load(src, chunkname, "t", env)
  if not f then error(err, 0) end
  local r = f(name)
  if r == nil then r = true end
  loaded[name] = r
  return r
end

-- ctx
local ctx = {}
ctx.reply = hb.act_reply
ctx.send = hb.act_send
ctx.send_cmd = hb.act_send_cmd
ctx.send_transient = hb.act_send_transient
ctx.recall = hb.act_recall
ctx.kick = hb.act_kick
ctx.mute = hb.act_mute
ctx.add = hb.act_add
ctx.warn = hb.act_warn
ctx.update_attr = hb.act_update_attr
ctx.now = hb.now
ctx.log = function(a, b)
  if b == nil then return hb.log("info", tostring(a)) end
  return hb.log(a, tostring(b))
end

-- verdicts
ctx.allow = function(opts)
  return { verdict = "allow", actions = opts and opts.actions }
end
ctx.block = function(reason, opts)
  opts = opts or {}
  return { verdict = "block", reason = reason, code = opts.code, silent = opts.silent, actions = opts.actions }
end
ctx.replace = function(text, opts)
  return { verdict = "replace", text = text, actions = opts and opts.actions }
end
ctx.drop = function(reason)
  return { verdict = "drop", reason = reason }
end

-- timers: functions live here, schedules in the runtime
local timer_fns = {}
ctx.every = function(seconds, fn)
  if type(fn) ~= "function" then fail("ctx.every: function expected") end
  local id = hb.timer_add(seconds, true)
  timer_fns[id] = fn
  return id
end
ctx.after = function(seconds, fn)
  if type(fn) ~= "function" then fail("ctx.after: function expected") end
  local id = hb.timer_add(seconds, false)
  timer_fns[id] = fn
  return id
end
ctx.cancel = function(id)
  timer_fns[id] = nil
  return hb.timer_cancel(id)
end
local function fire_timer(id, once)
  local fn = timer_fns[id]
  if once then timer_fns[id] = nil end
  if fn then return fn(ctx) end
end

-- state: scoped views over one key space per plugin
local function checkkey(k)
  local t = type(k)
  if t == "number" then return tostring(k) end
  if t ~= "string" then fail("state key must be a string, got " .. t) end
  return k
end
local function view(prefix)
  local v = {}
  v.get = function(k) return hb.state_get(prefix .. checkkey(k)) end
  v.set = function(k, value, ttl) return hb.state_set(prefix .. checkkey(k), value, ttl) end
  v.incr = function(k, by, ttl) return hb.state_incr(prefix .. checkkey(k), by, ttl) end
  v.delete = function(k) return hb.state_delete(prefix .. checkkey(k)) end
  v.keys = function(p)
    if p ~= nil and type(p) ~= "string" then fail("state.keys: prefix must be a string") end
    local ks = hb.state_keys(prefix .. (p or ""))
    if #prefix > 0 then
      for i = 1, #ks do ks[i] = ks[i]:sub(#prefix + 1) end
    end
    return ks
  end
  return v
end
local function scopeid(what, id)
  local t = type(id)
  if t ~= "string" and t ~= "number" then fail("ctx.state." .. what .. ": id must be a string") end
  return tostring(id)
end
local state = view("")
state.conv = function(cid) return view("conv:" .. scopeid("conv", cid) .. ":") end
state.user = function(uid) return view("user:" .. scopeid("user", uid) .. ":") end
ctx.state = state

-- custom message types
local types = {}
types.register = hb.types_register
types.validate = hb.types_validate
types.name = hb.types_name
types.number = hb.types_number
types.build = function(t, attrs, extra)
  local num = hb.types_number(t)
  if num == nil then fail("ctx.types.build: unknown message type " .. tostring(t)) end
  local m = {}
  if extra ~= nil then
    if type(extra) ~= "table" then fail("ctx.types.build: extra fields must be a table") end
    for k, v in pairs(extra) do m[k] = v end
  end
  m.type = num
  m.type_name = hb.types_name(num)
  m.attrs = attrs or {}
  local ok, err = hb.types_validate(m)
  if not ok then fail(err) end
  return m
end
ctx.types = types

return env, ctx, fire_timer
"""#
