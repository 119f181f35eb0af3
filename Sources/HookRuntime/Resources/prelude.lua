-- The prelude: run in every fresh plugin state before the plugin itself (LuaPlugin.setUp, chunk name
-- "=(hookbot)"; error positions skip its frames). It builds the sandbox environment from a whitelist and
-- the `ctx` table on top of the raw Swift functions in `hb` (Callbacks.swift and friends), and returns
-- env, ctx and the dispatch functions the host calls: fire_timer, run_command, http_done.
-- `make lint` checks its syntax with luac -p.
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

-- Library functions that can loop for long inside C, where the instruction budget and the deadline
-- cannot stop them, are replaced: table.move and table.sort by Lua versions (every step counted), and
-- pattern matching by the C functions behind a cost check. A backtracking pattern costs about n^k steps
-- for k unbounded repetitions (*, +, -) on a subject of length n (n^(k-1) when anchored with ^); the
-- check refuses subjects longer than the pattern allows (about 2e7 steps), so no single match can hold
-- the Lua thread for long.
local floor, mtype, tointeger = G.math.floor, G.math.type, G.math.tointeger
local maxsteps = 2e7

local function repetitions(p)
  local count, i, n = 0, 1, #p
  while i <= n do
    local c = p:sub(i, i)
    if c == "%" then
      i = i + 2
    elseif c == "[" then
      i = i + 1
      if p:sub(i, i) == "^" then i = i + 1 end
      if p:sub(i, i) == "]" then i = i + 1 end
      while i <= n and p:sub(i, i) ~= "]" do
        if p:sub(i, i) == "%" then i = i + 1 end
        i = i + 1
      end
      i = i + 1
    else
      if (c == "*" or c == "+" or c == "-") and i > 1 then count = count + 1 end
      i = i + 1
    end
  end
  return count
end

local function checked(name, f)
  return function(s, p, ...)
    if type(s) == "string" and type(p) == "string" and #s > 64 then
      local plain = name == "find" and select(2, ...) == true
      if not plain then
        local k = repetitions(p)
        if p:sub(1, 1) == "^" and name ~= "gmatch" then k = k - 1 end
        if k >= 2 and #s > floor(maxsteps ^ (1 / k)) then
          fail("string." .. name .. ": the pattern has " .. k .. " unbounded repetitions; on " .. #s ..
               " characters it could run for very long (at most " .. floor(maxsteps ^ (1 / k)) ..
               " here): split or trim the text first, or simplify the pattern")
        end
      end
    end
    return f(s, p, ...)
  end
end

local function safe_string()
  local s = copy(G.string, nodump)
  for _, name in ipairs({ "find", "match", "gmatch", "gsub" }) do s[name] = checked(name, G.string[name]) end
  return s
end

local function integer_arg(v, n, fname)
  local i = tointeger(v)
  if i == nil then fail("bad argument #" .. n .. " to '" .. fname .. "' (number has no integer representation)") end
  return i
end

local function table_move(a1, f, e, t, a2)
  if a2 == nil then a2 = a1 end
  f, e, t = integer_arg(f, 2, "move"), integer_arg(e, 3, "move"), integer_arg(t, 4, "move")
  if e >= f then
    if t > e or t <= f or a1 ~= a2 then
      for i = 0, e - f do a2[t + i] = a1[f + i] end
    else
      for i = e - f, 0, -1 do a2[t + i] = a1[f + i] end
    end
  end
  return a2
end

-- Stable merge sort (insertion-sorted runs of 8, then bottom-up merges).
local function table_sort(t, comp)
  if type(t) ~= "table" then fail("bad argument #1 to 'sort' (table expected, got " .. type(t) .. ")") end
  if comp ~= nil and type(comp) ~= "function" then fail("bad argument #2 to 'sort' (function expected)") end
  local n = #t
  if n < 2 then return end
  local lt = comp or function(x, y) return x < y end
  local a, b = {}, {}
  for i = 1, n do a[i] = t[i] end
  for lo = 1, n, 8 do
    local hi = lo + 7
    if hi > n then hi = n end
    for i = lo + 1, hi do
      local v, j = a[i], i - 1
      while j >= lo and lt(v, a[j]) do a[j + 1] = a[j]; j = j - 1 end
      a[j + 1] = v
    end
  end
  local width = 8
  while width < n do
    for lo = 1, n, 2 * width do
      local mid, hi = lo + width - 1, lo + 2 * width - 1
      if mid > n then mid = n end
      if hi > n then hi = n end
      local i, j, k = lo, mid + 1, lo
      while i <= mid and j <= hi do
        if lt(a[j], a[i]) then b[k] = a[j]; j = j + 1 else b[k] = a[i]; i = i + 1 end
        k = k + 1
      end
      while i <= mid do b[k] = a[i]; i = i + 1; k = k + 1 end
      while j <= hi do b[k] = a[j]; j = j + 1; k = k + 1 end
    end
    a, b = b, a
    width = width * 2
  end
  for i = 1, n do t[i] = a[i] end
end

env.string = safe_string()
env.table = copy(G.table)
env.table.move = table_move
env.table.sort = table_sort
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
smt.__index = safe_string()
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
-- cards (Card*.swift): a message of type 100 with buttons; clicks come back to on_action
ctx.card = function(spec)
  local id, cid = hb.card_send(spec)
  return { id = id, cid = cid, update = function(_, patch) return hb.card_update(id, patch) end }
end
ctx.card_update = function(id, patch) return hb.card_update(id, patch) end
ctx.card_get = function(id) return hb.card_get(id) end
-- ctx.dm(uid, message): to uid in the bot's 1:1 conversation with them (opened by the host once)
ctx.dm = hb.act_dm
ctx.dm_conversation = hb.dm_conversation
-- ctx.conv(cid): a conversation's mutes, block list and lock (carried out by the server), and its
-- members as the host knows them
ctx.conv = function(cid)
  if cid ~= nil and type(cid) ~= "string" then fail("ctx.conv: conversation id (a string) expected") end
  return {
    mute = function(uid, seconds, reason) return hb.act_mute(cid, uid, seconds, reason) end,
    unmute = function(uid, reason) return hb.act_unmute(cid, uid, reason) end,
    block = function(uid) return hb.act_block(cid, uid) end,
    unblock = function(uid) return hb.act_unblock(cid, uid) end,
    muted = function() return hb.muted(cid) end,
    member = function(uid) return hb.conv_member(cid, uid) end,
    lock = function(reason) return hb.act_lock(cid, reason) end,
    unlock = function(reason) return hb.act_unlock(cid, reason) end,
    locked = function() return hb.conv_locked(cid) end,
  }
end
ctx.now = hb.now
-- text matching (TextMatcher*.swift): compiled matchers and the normalisation they use
ctx.matcher = hb.matcher_new
ctx.text = { normalise = hb.text_normalise, urls = hb.text_urls, stats = hb.text_stats }
-- translations (Locale*.swift): the plugin's words in the current member's locale
ctx.t = hb.t
ctx.locale = {
  current = function(opts) return hb.locale("current", opts) end,
  default = function() return hb.locale("default") end,
  available = function() return hb.locale("available") end,
  user = function(uid) return hb.locale("user", uid) end,
  set_user = function(uid, tag) return hb.locale("set_user", uid, tag) end,
  conv = function(cid) return hb.locale("conv", cid) end,
  set_conv = function(cid, tag) return hb.locale("set_conv", cid, tag) end,
}
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

-- dialogs (PluginEngine+Dialogs.swift): the host checks and records the question, the prompt goes out,
-- the hook's coroutine waits; it resumes with the answer message, or nil and why
local co_yield = G.coroutine.yield
ctx.ask = function(prompt, opts)
  hb.ask(prompt, opts)
  if prompt ~= nil then ctx.reply(prompt) end
  return co_yield()
end

-- timers: functions live here, schedules in the runtime
local timer_fns = {}
local function add_timer(name, seconds, fn, repeating)
  if type(fn) ~= "function" then fail(name .. ": function expected") end
  local id = hb.timer_add(seconds, repeating)
  timer_fns[id] = fn
  return id
end
ctx.every = function(seconds, fn) return add_timer("ctx.every", seconds, fn, true) end
ctx.after = function(seconds, fn) return add_timer("ctx.after", seconds, fn, false) end
ctx.cancel = function(id)
  timer_fns[id] = nil
  return hb.timer_cancel(id)
end
local function fire_timer(id, once)
  local fn = timer_fns[id]
  if once then timer_fns[id] = nil end
  if fn then return fn(ctx) end
end
-- schedules (PluginEngine+Schedules.swift): persisted jobs calling plugin.schedules[fn] (or plugin[fn])
ctx.schedule = {
  cron = function(expr, fn, data, opts) return hb.schedule_add("cron", expr, fn, data, opts) end,
  at = function(time, fn, data, opts) return hb.schedule_add("at", time, fn, data, opts) end,
  every = function(seconds, fn, data, opts) return hb.schedule_add("every", seconds, fn, data, opts) end,
  list = hb.schedule_list,
  cancel = hb.schedule_cancel,
  next = hb.schedule_next,
  date = hb.schedule_date,
}

-- commands: declarations checked and kept by the runtime, functions here
local command_fns = {}
ctx.commands = {
  add = function(spec)
    if type(spec) ~= "table" then fail("ctx.commands.add: expects a table {name = ..., run = function(args, msg, ctx) ... end}") end
    if type(spec.run) ~= "function" then fail("ctx.commands.add: run must be a function(args, msg, ctx)") end
    local name = hb.command_add({ name = spec.name, args = spec.args, roles = spec.roles,
                                  cooldown = spec.cooldown, description = spec.description })
    command_fns[name] = spec.run
    return name
  end,
}
local function run_command(name, args, msg)
  local fn = command_fns[name]
  if fn then return fn(args, msg, ctx) end
end
-- HTTP: calls made by the runtime, callbacks here (run later, with the ctx of the event that started them)
local http_fns = {}
local function http_request(opts, fn)
  if type(fn) ~= "function" then fail("ctx.http: a callback function(res, ctx) is expected") end
  local id, err = hb.http_start(opts)
  if not id then return nil, err end
  http_fns[id] = fn
  return id
end
ctx.http = {
  request = http_request,
  get = function(url, fn) return http_request({ method = "GET", url = url }, fn) end,
  post = function(url, body, fn) return http_request({ method = "POST", url = url, body = body }, fn) end,
  json = function(method, url, value, fn) return http_request({ method = method, url = url, json = value }, fn) end,
}
local function http_done(id, res)
  local fn = http_fns[id]
  http_fns[id] = nil
  if fn then return fn(res, ctx) end
end
-- stored files: ctx.media.info / sha256 / read take an id, a message (its file) or msg.file
local function media_id(v)
  if type(v) == "string" then return v end
  if type(v) ~= "table" then return nil, "a file id (a string), a message or msg.file is expected" end
  if type(v.file) == "table" then v = v.file
  elseif v.cid ~= nil or v.from ~= nil then return nil, "the message has no file" end
  if type(v.id) ~= "string" then return nil, "not a file stored on the hub (a URL-only file has no id)" end
  return v.id
end
ctx.media = {
  info = function(v)
    local id, err = media_id(v)
    if not id then return nil, err end
    return hb.media_info(id)
  end,
  sha256 = function(v)
    local id, err = media_id(v)
    if not id then return nil, err end
    local info, why = hb.media_info(id)
    if not info then return nil, why end
    return info.sha256
  end,
  read = function(v, max_bytes)
    local id, err = media_id(v)
    if not id then return nil, err end
    return hb.media_read(id, max_bytes)
  end,
}
ctx.roles = {
  has = function(user, role) return hb.roles("has", user, role) end,
  grant = function(user, role) return hb.roles("grant", user, role) end,
  revoke = function(user, role) return hb.roles("revoke", user, role) end,
}

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
  v.incr = function(k, by, ttl, mode) return hb.state_incr(prefix .. checkkey(k), by, ttl, mode) end
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

return env, ctx, fire_timer, run_command, http_done
