-- Shared ban lists (Hookbot's answer to Draupnir's policy lists): client ids and glob patterns
-- (`spam-*`, `*-bot-[0-9]*`), each with a required reason, who banned and when, kept in state and
-- applied in every conversation the bot moderates:
--
--  * the server's block list (`ctx.conv(cid).block`) of every subscribed conversation the bot is a
--    member of, so the ban holds with the bot stopped (the server refuses joins and adds with 4315);
--  * as the server's interceptor, the `membership` review refuses joins and adds of banned ids and of
--    ids matching a pattern (4305 with `code` as appCode), and a banned member's message is refused;
--  * `on_member_joined` as a fallback (the bot only a member): a banned joiner is blocked at once.
--
-- Moderators use `!ban <user|pattern> <reason>`, `!unban <user|pattern>`, `!banlist [filter]`.
-- The list is published at the plugin's webhook (`GET`/`POST /hooks/banlist/list.json`, with the
-- webhook secret of `[webhooks] banlist` as the shared token), and lists published by other Hookbots
-- are subscribed to by URL (`subscribe = [{url, token, every}]`, through `ctx.http`: the host must be
-- in `[http.banlist] hosts`), refreshed by a timer and merged with the local one: a remote entry
-- carries its source, and one removed from its list is lifted only when no other list has it. A
-- remote answer that is not JSON, too big or of the wrong shape is logged and ignored; the last good
-- copy stays in force.

local modlog = require("modlog")

local MAX_TARGET = 64

-- Compiled once per loaded version, rebuilt when a list changes.
local exact, patterns, cache, cached = {}, {}, {}, 0
local known = {}          -- conversations the bot is a member of (learned from events, kept in state)
local only, excluded, allowed, moderators = {}, {}, {}, {}
local todo, todo_set = {}, {} -- client ids whose server blocks are to be brought in line

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do s[v] = true end
  return s
end

-- A glob: `*` any run of characters, `?` one, `[abc]`, `[a-z]`, `[!0-9]` one of (or none of) a set.
-- Compiled to tokens; matched by the two-pointer algorithm with one backtrack point (the last `*`),
-- at most #pattern × #subject steps, and both are at most 64 characters.
local function compile(glob)
  local tokens, i, n = {}, 1, #glob
  while i <= n do
    local c = glob:sub(i, i)
    if c == "*" then
      if not (tokens[#tokens] and tokens[#tokens].star) then tokens[#tokens + 1] = { star = true } end
      i = i + 1
    elseif c == "?" then
      tokens[#tokens + 1] = { any = true }
      i = i + 1
    elseif c == "[" then
      local close = glob:find("]", i + 2, true)
      if not close then return nil, "unclosed [ in " .. glob end
      local body, neg = glob:sub(i + 1, close - 1), false
      if body:sub(1, 1) == "!" then neg, body = true, body:sub(2) end
      if body == "" then return nil, "empty [] in " .. glob end
      local set, ranges, j = {}, {}, 1
      while j <= #body do
        local a = body:sub(j, j)
        if body:sub(j + 1, j + 1) == "-" and j + 2 <= #body then
          ranges[#ranges + 1] = { a, body:sub(j + 2, j + 2) }
          j = j + 3
        else
          set[a] = true
          j = j + 1
        end
      end
      tokens[#tokens + 1] = { set = set, ranges = ranges, neg = neg }
      i = close + 1
    else
      tokens[#tokens + 1] = { lit = c }
      i = i + 1
    end
  end
  return tokens
end

local function one(t, ch)
  if t.lit then return t.lit == ch end
  if t.any then return true end
  local hit = t.set[ch] == true
  if not hit then
    for _, r in ipairs(t.ranges) do
      if ch >= r[1] and ch <= r[2] then hit = true; break end
    end
  end
  return hit ~= t.neg
end

local function glob_match(tokens, s)
  local ti, si, n, m = 1, 1, #tokens, #s
  local star_t, star_s = nil, 0
  while si <= m do
    local t = tokens[ti]
    if t and t.star then
      star_t, star_s, ti = ti, si, ti + 1
    elseif t and one(t, s:sub(si, si)) then
      ti, si = ti + 1, si + 1
    elseif star_t then
      star_s = star_s + 1
      ti, si = star_t + 1, star_s
    else
      return false
    end
  end
  while tokens[ti] and tokens[ti].star do ti = ti + 1 end
  return ti > n
end

local function is_pattern(target) return target:find("[%*%?%[]") ~= nil end

-- nil when `target` may be banned, else why not: a key of locales/banlist/*.toml and its variables.
local function check_target(target)
  if type(target) ~= "string" or target == "" then return "target.required" end
  if #target > MAX_TARGET then return "target.long", { max = MAX_TARGET } end
  if target:find("[%s%c]") then return "target.spaces" end
  if is_pattern(target) then
    local tokens, err = compile(target)
    if not tokens then return "target.glob", { problem = err } end
    local literal = 0
    for _, t in ipairs(tokens) do if t.lit then literal = literal + 1 end end
    if literal < 3 then return "target.broad", { target = target } end
  end
  return nil
end

-- Every list in force: the local one and each subscription's last good copy.
local function sources(ctx)
  local out = {}
  local loc = {}
  for _, key in ipairs(ctx.state.keys("ban:")) do
    local e = ctx.state.get(key)
    if type(e) == "table" then
      e.target = key:sub(5)
      loc[#loc + 1] = e
    end
  end
  out[#out + 1] = { name = "local", entries = loc }
  for _, sub in ipairs(ctx.config.subscribe or {}) do
    local copy = type(sub) == "table" and sub.url and ctx.state.get("remote:" .. sub.url)
    if type(copy) == "table" and type(copy.entries) == "table" then
      out[#out + 1] = { name = sub.url, entries = copy.entries }
    end
  end
  return out
end

local function rebuild(ctx)
  exact, patterns, cache, cached = {}, {}, {}, 0
  for _, src in ipairs(sources(ctx)) do
    for _, e in ipairs(src.entries) do
      local entry = { target = e.target, reason = e.reason, by = e.by, at = e.at, source = src.name }
      if is_pattern(e.target) then
        local tokens = compile(e.target)
        if tokens then patterns[#patterns + 1] = { tokens = tokens, entry = entry } end
      elseif not exact[e.target] then
        exact[e.target] = entry
      end
    end
  end
end

-- The entry banning `uid`, if any (client ids on `allow` never are).
local function lookup(uid)
  if type(uid) ~= "string" or allowed[uid] then return nil end
  local hit = cache[uid]
  if hit == nil then
    hit = exact[uid] or false
    if not hit then
      for _, p in ipairs(patterns) do
        if glob_match(p.tokens, uid) then hit = p.entry; break end
      end
    end
    if cached >= 20000 then cache, cached = {}, 0 end -- senders seen: bounded memory
    cache[uid] = hit
    cached = cached + 1
  end
  return hit or nil
end

local function exempt(ctx, uid)
  return uid == ctx.bot or moderators[uid] or ctx.roles.has(uid, "moderator")
end

local function is_moderator(ctx, uid) return moderators[uid] == true or ctx.roles.has(uid, "moderator") end

-- Does the list apply in this conversation?
local function subscribed(cid)
  if excluded[cid] then return false end
  if next(only) then return only[cid] == true end
  return true
end

-- The conversations bans are put on the server's block list of.
local function targets()
  local out = {}
  for cid in pairs(known) do
    if subscribed(cid) then out[#out + 1] = cid end
  end
  table.sort(out)
  return out
end

local function learn(ctx, cid)
  if type(cid) == "string" and cid ~= "" and not known[cid] then
    known[cid] = true
    ctx.state.set("convs", known)
    -- A new conversation: every ban goes onto its block list too.
    for uid in pairs(exact) do if not todo_set[uid] then todo_set[uid] = true; todo[#todo + 1] = uid end end
  end
end

local function forget(ctx, cid)
  if known[cid] then
    known[cid] = nil
    ctx.state.set("convs", known)
  end
end

local function queue(uid)
  if not todo_set[uid] then
    todo_set[uid] = true
    todo[#todo + 1] = uid
  end
end

-- Blocks (or unblocks) `uid` in `cid` on the server; false when the bot cannot act there.
local function server(ctx, cid, uid, block)
  local conv = ctx.conv(cid)
  local ok, err = pcall(block and conv.block or conv.unblock, uid)
  if not ok then
    ctx.log("warning", "banlist: cannot " .. (block and "block " or "unblock ") .. uid .. " in " .. cid .. ": " .. tostring(err))
    if tostring(err):find("not a member", 1, true) then forget(ctx, cid) end
  end
  return ok
end

-- Brings the server's block lists in line with the lists for the queued client ids, at most `budget`
-- block actions in this call (the rest wait for the next second). Blocks this plugin made are kept in
-- `applied:<uid>`, so an unban lifts only those.
local function process(ctx, budget)
  local conv_targets, checks = nil, 0
  while #todo > 0 and budget > 0 and checks < 1000 do
    checks = checks + 1
    local uid = todo[#todo] -- newest first: a ban just made is applied before a backlog
    local key = "applied:" .. uid
    local applied = ctx.state.get(key) or {}
    local banned = lookup(uid) and not exempt(ctx, uid)
    local changed, done = false, true
    if banned then
      conv_targets = conv_targets or targets()
      for _, cid in ipairs(conv_targets) do
        if not applied[cid] then
          if budget <= 0 then done = false; break end
          budget = budget - 1
          if server(ctx, cid, uid, true) then applied[cid] = true; changed = true end
        end
      end
    else
      local cids = {}
      for cid in pairs(applied) do cids[#cids + 1] = cid end
      table.sort(cids)
      for _, cid in ipairs(cids) do
        if budget <= 0 then done = false; break end
        budget = budget - 1
        server(ctx, cid, uid, false)
        applied[cid] = nil
        changed = true
      end
    end
    if changed then ctx.state.set(key, next(applied) and applied or nil) end
    if not done then break end
    todo[#todo] = nil
    todo_set[uid] = nil
  end
end

-- Blocks a banned id seen in `cid` now (the event's conversation may be one the bot only reviews).
local function block_here(ctx, cid, uid)
  local key = "applied:" .. uid
  local applied = ctx.state.get(key) or {}
  if not applied[cid] and server(ctx, cid, uid, true) then
    applied[cid] = true
    ctx.state.set(key, applied)
  end
  -- and everywhere else the bot moderates (a pattern's match becomes known by its id)
  queue(uid)
end

-- After a list changed: which ids to re-check. Exact ids changed, plus every id this plugin blocked
-- (a pattern removed may free some; one added may cover them).
local function changed(ctx, ids)
  rebuild(ctx)
  for _, key in ipairs(ctx.state.keys("applied:")) do queue(key:sub(9)) end
  -- queued last, so processed first
  for _, uid in ipairs(ids) do
    if not is_pattern(uid) then
      if todo_set[uid] then
        for i, v in ipairs(todo) do if v == uid then table.remove(todo, i); break end end
        todo_set[uid] = nil
      end
      queue(uid)
    end
  end
end

local function describe(ctx, e)
  local when = e.at and os.date("!%Y-%m-%d", math.floor(e.at)) or "?"
  local src = (e.source and e.source ~= "local") and (" [" .. e.source .. "]") or ""
  return ctx.t("list.entry", { target = e.target, reason = e.reason or "?", by = e.by or "?", when = when, source = src })
end

-- The remote list's entries that are usable, or nil and why the whole answer is refused.
local function parse_remote(ctx, res)
  if not res.ok then return nil, res.error or ("HTTP " .. tostring(res.status)) end
  local doc = res.json
  if type(doc) ~= "table" then return nil, "not JSON" end
  local entries = doc.entries
  if type(entries) ~= "table" then return nil, "no entries list" end
  if #entries > ctx.config.max_entries then
    return nil, #entries .. " entries, more than max_entries (" .. ctx.config.max_entries .. ")"
  end
  local out, skipped, seen = {}, 0, {}
  for _, e in ipairs(entries) do
    if type(e) == "table" and type(e.target) == "string" and not check_target(e.target)
      and type(e.reason) == "string" and e.reason ~= "" and not seen[e.target] then
      seen[e.target] = true
      out[#out + 1] = { target = e.target, reason = e.reason:sub(1, 300),
        by = type(e.by) == "string" and e.by:sub(1, 64) or nil, at = tonumber(e.at) }
    else
      skipped = skipped + 1
    end
  end
  if skipped > 0 then ctx.log("warning", "banlist: " .. skipped .. " malformed entries skipped") end
  return out
end

local function fetch(ctx, sub)
  local headers = {}
  if type(sub.token) == "string" and sub.token ~= "" then headers["X-Hookbot-Secret"] = sub.token end
  local id, err = ctx.http.request({ url = sub.url, method = "GET", headers = headers, timeout = sub.timeout or 10 },
    function(res, ctx)
      local key = "remote:" .. sub.url
      local copy = ctx.state.get(key) or {}
      local entries, problem = parse_remote(ctx, res)
      if not entries then
        ctx.log("warning", "banlist: list " .. sub.url .. " ignored, keeping the last good copy: " .. problem)
        copy.error, copy.failed_at = problem, ctx.now()
        ctx.state.set(key, copy)
        return
      end
      local before, after, ids = {}, {}, {}
      for _, e in ipairs(copy.entries or {}) do before[e.target] = true end
      local added, removed = 0, 0
      for _, e in ipairs(entries) do
        after[e.target] = true
        if not before[e.target] then added = added + 1; ids[#ids + 1] = e.target end
      end
      for t in pairs(before) do
        if not after[t] then removed = removed + 1; ids[#ids + 1] = t end
      end
      ctx.state.set(key, { entries = entries, fetched_at = ctx.now() })
      if added + removed > 0 then
        changed(ctx, ids)
        modlog.post(ctx, { action = "list update", target = sub.url, by = "banlist",
          reason = string.format("+%d −%d, %d entries", added, removed, #entries) })
        process(ctx, ctx.config.batch)
      end
    end)
  if not id then ctx.log("warning", "banlist: cannot fetch " .. sub.url .. ": " .. tostring(err)) end
end

local function ban_command(args, msg, ctx)
  local target = (args.target or ""):gsub("^@", "")
  local prefix = ctx.commands.prefix .. "ban: "
  local problem, vars = check_target(target)
  if problem then return ctx.reply(prefix .. ctx.t(problem, vars)) end
  local reason = (args.reason or ""):match("^%s*(.-)%s*$")
  if reason == "" then return ctx.reply(prefix .. ctx.t("ban.reason_required")) end
  if not is_pattern(target) and (exempt(ctx, target) or allowed[target]) then
    return ctx.reply(prefix .. ctx.t("ban.exempt", { target = target }))
  end
  local n = #ctx.state.keys("ban:")
  if not ctx.state.get("ban:" .. target) and n >= ctx.config.max_entries then
    return ctx.reply(prefix .. ctx.t("ban.full", { count = n }))
  end
  ctx.state.set("ban:" .. target, { reason = reason:sub(1, 300), by = msg.from, at = ctx.now() })
  changed(ctx, { target })
  learn(ctx, msg.cid)
  process(ctx, ctx.config.batch)
  modlog.post(ctx, { action = "ban", target = target, cid = msg.cid, reason = reason, by = msg.from,
    rule = is_pattern(target) and "pattern" or nil, undo = ctx.commands.prefix .. "unban " .. target })
  local where = #targets()
  ctx.reply(ctx.t("ban.done", { target = target, count = where, reason = reason }))
end

local function unban_command(args, msg, ctx)
  local target = (args.target or ""):gsub("^@", "")
  local entry = ctx.state.get("ban:" .. target)
  if not entry then
    rebuild(ctx)
    local e = exact[target]
    if not e then
      for _, p in ipairs(patterns) do if p.entry.target == target then e = p.entry; break end end
    end
    if e then return ctx.reply(ctx.t("unban.remote", { target = target, source = e.source })) end
    return ctx.reply(ctx.t("unban.unknown", { target = target }))
  end
  ctx.state.delete("ban:" .. target)
  changed(ctx, { target })
  process(ctx, ctx.config.batch)
  modlog.post(ctx, { action = "unban", target = target, cid = msg.cid, by = msg.from,
    reason = "was: " .. tostring(entry.reason), undo = ctx.commands.prefix .. "ban " .. target .. " " .. tostring(entry.reason) })
  local still = lookup(target)
  if still then
    return ctx.reply(ctx.t("unban.still", { target = target, source = still.source, entry = still.target }))
  end
  ctx.reply(ctx.t("unban.done", { target = target }))
end

local function list_command(args, msg, ctx)
  rebuild(ctx)
  local filter = args.filter and args.filter:lower() or nil
  local all = {}
  for _, e in pairs(exact) do all[#all + 1] = e end
  for _, p in ipairs(patterns) do all[#all + 1] = p.entry end
  table.sort(all, function(a, b) return a.target < b.target end)
  local lines, shown, total = {}, 0, 0
  for _, e in ipairs(all) do
    if not filter or e.target:lower():find(filter, 1, true) or (e.reason or ""):lower():find(filter, 1, true)
      or (e.source or ""):lower():find(filter, 1, true) then
      total = total + 1
      if shown < 20 then shown = shown + 1; lines[#lines + 1] = describe(ctx, e) end
    end
  end
  if total == 0 then
    return ctx.reply(filter and ctx.t("list.no_match", { filter = args.filter }) or ctx.t("list.empty"))
  end
  local head = filter and ctx.t("list.head_matching", { count = total, filter = args.filter }) or ctx.t("list.head", { count = total })
  if total > shown then head = head .. ctx.t("list.first", { shown = shown }) end
  ctx.reply(head .. ":\n" .. table.concat(lines, "\n"))
end

return {
  name = "banlist",
  priority = 200, -- before moderation: a banned member's message is refused as banned
  config = {
    moderators = {},    -- hold the moderator role (as do [roles] moderator)
    conversations = {}, -- where the list applies (empty: every conversation the bot moderates)
    exclude = {},       -- conversations where it never applies
    allow = {},         -- client ids never banned (a pattern's false positive, a remote entry overridden)
    code = 4330,        -- appCode of refused joins and messages
    publish = true,     -- answer GET/POST /hooks/banlist/list.json (needs [webhooks] banlist)
    publish_remote = false, -- also publish the entries of subscribed lists
    subscribe = {},     -- lists of other Hookbots: { {url = "...", token = "...", every = 300} }
    max_entries = 5000, -- the largest list kept (local, and each subscription)
    batch = 200,        -- server blocks per hook call; the rest follow each second
    modlog = false,     -- conversation the moderators' log is posted to
  },

  on_load = function(ctx)
    local c = ctx.config
    only, excluded, allowed = set_of(c.conversations), set_of(c.exclude), set_of(c.allow)
    moderators = set_of(c.moderators)
    for uid in pairs(moderators) do ctx.roles.grant(uid, "moderator") end
    for i, sub in ipairs(c.subscribe) do
      if type(sub) ~= "table" or type(sub.url) ~= "string" or not sub.url:match("^https?://") then
        error("plugins.banlist.subscribe[" .. i .. "]: needs url = \"http(s)://…\"", 0)
      end
      if sub.every ~= nil and (type(sub.every) ~= "number" or sub.every < 1) then
        error("plugins.banlist.subscribe[" .. i .. "].every: seconds, at least 1", 0)
      end
    end
    known = ctx.state.get("convs") or {}
    for cid in pairs(only) do known[cid] = true end
    todo, todo_set = {}, {}
    rebuild(ctx)
    -- Bring every block list in line after a restart or reload (in batches, each second).
    for uid in pairs(exact) do queue(uid) end
    for _, key in ipairs(ctx.state.keys("applied:")) do queue(key:sub(9)) end
    ctx.every(1, function(ctx) if #todo > 0 then process(ctx, ctx.config.batch) end end)
    for _, sub in ipairs(c.subscribe) do
      ctx.after(0.05, function(ctx) fetch(ctx, sub) end)
      ctx.every(sub.every or 300, function(ctx) fetch(ctx, sub) end)
    end
    ctx.commands.add{ name = "ban", args = "<target> <reason:text>", roles = { "moderator" },
      description = "ban a client id or glob pattern (spam-*) in every conversation, with a reason",
      run = ban_command }
    ctx.commands.add{ name = "unban", args = "<target>", roles = { "moderator" },
      description = "lift a ban of the local list", run = unban_command }
    ctx.commands.add{ name = "banlist", args = "[filter:text]", roles = { "moderator" },
      description = "the bans in force (local and subscribed), filtered by id, reason or source",
      run = list_command }
  end,

  moderation = function(msg, ctx)
    local e = lookup(msg.from)
    if not e or not subscribed(msg.cid) or exempt(ctx, msg.from) then return nil end
    block_here(ctx, msg.cid, msg.from)
    process(ctx, ctx.config.batch)
    return ctx.block(ctx.t("refused.message", { reason = e.reason }), { code = ctx.config.code })
  end,

  membership = function(ev, ctx)
    if (ev.action ~= "join" and ev.action ~= "invite") or not subscribed(ev.cid) then return nil end
    local refused = {}
    for _, uid in ipairs(ev.members or {}) do
      local e = lookup(uid)
      if e and not exempt(ctx, uid) then
        refused[#refused + 1] = uid .. " (" .. e.reason .. ")"
        block_here(ctx, ev.cid, uid)
        modlog.post(ctx, { action = "refuse " .. ev.action, target = uid, cid = ev.cid, by = "banlist",
          rule = e.target, reason = e.reason, undo = ctx.commands.prefix .. "unban " .. e.target })
      end
    end
    if #refused > 0 then
      process(ctx, ctx.config.batch)
      return ctx.block(ctx.t("refused.join", { members = table.concat(refused, ", ") }), { code = ctx.config.code })
    end
  end,

  on_invited = function(ev, ctx) learn(ctx, ev.cid); process(ctx, ctx.config.batch) end,
  on_kicked = function(ev, ctx) forget(ctx, ev.cid) end,

  on_member_joined = function(ev, ctx)
    learn(ctx, ev.cid)
    if not subscribed(ev.cid) then return end
    for _, uid in ipairs(ev.members) do
      local e = lookup(uid)
      if e and not exempt(ctx, uid) then
        block_here(ctx, ev.cid, uid)
        modlog.post(ctx, { action = "block", target = uid, cid = ev.cid, by = "banlist", rule = e.target,
          reason = e.reason, undo = ctx.commands.prefix .. "unban " .. e.target })
      end
    end
    process(ctx, ctx.config.batch)
  end,

  on_receive = function(msg, ctx) learn(ctx, msg.cid) end,

  on_http = function(req, ctx)
    if not ctx.config.publish then return { status = 404, body = { code = 404, reason = "this bot does not publish its ban list" } } end
    if req.path ~= "/list.json" and req.path ~= "/" then
      return { status = 404, body = { code = 404, reason = "GET /hooks/banlist/list.json" } }
    end
    if req.method ~= "GET" and req.method ~= "POST" then
      return { status = 405, body = { code = 405, reason = "GET or POST" } }
    end
    local entries = {}
    for _, src in ipairs(sources(ctx)) do
      if src.name == "local" or ctx.config.publish_remote then
        for _, e in ipairs(src.entries) do
          entries[#entries + 1] = { target = e.target, reason = e.reason, by = e.by, at = e.at,
            source = src.name ~= "local" and src.name or nil }
        end
      end
    end
    table.sort(entries, function(a, b) return a.target < b.target end)
    local name = ctx.bot or "hookbot"
    if #entries == 0 then
      -- An empty Lua table would be sent as {}: the list is [] to any reader.
      return { status = 200, headers = { ["Content-Type"] = "application/json" },
        body = string.format('{"name": "%s", "generated_at": %.3f, "count": 0, "entries": []}',
          name:gsub('[%c"\\]', ""), ctx.now()) }
    end
    return { status = 200, headers = { ["Content-Type"] = "application/json" },
      body = { name = name, generated_at = ctx.now(), count = #entries, entries = entries } }
  end,
}
