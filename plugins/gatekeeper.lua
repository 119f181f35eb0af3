-- Gatekeeper: join screening, join waves and raid mode.
--
-- * Screening (off by default; `screening = true`, or a list of conversation ids): a new member is
--   muted on the server for `answer_seconds` (so the mute holds while the bot restarts) and asked a
--   question (arithmetic, pick the emoji, or your own; in the member's language through ctx.t and
--   plugins/locales/gatekeeper/, or always English, Chinese or both). The bot asks it in a 1:1
--   chat it opens with the member (`ctx.dm`; `dm = false` turns this off), in the mute's reason, and, with
--   `ask_in_group = true`, in the group with a mention; the member answers in the 1:1 chat (the bot's, or
--   one the member opened with the bot), or with `!answer <text>` wherever the bot is. The
--   right answer lifts the mute; `tries` wrong answers, or no answer in time, remove the member (kick).
-- * Join waves (on by default): `wave.joins` joins within `wave.seconds` lock the conversation to
--   invite-only (`ctx.conv(cid).lock`), turn raid mode on, mute the members who joined in the wave, and
--   alert the moderators (in the conversation and in the mod-log). It unlocks after `lock_minutes`, or with
--   `!gate unlock`. From `wave.surge` joins within the window, the messages of the members who joined in it
--   are refused until the window has passed (a wave is caught before its first members can post much).
-- * Raid mode (after a wave, or `!gate raid on [minutes]`): every new joiner is muted for
--   `raid_mute_minutes` (or kicked, `raid_action = "kick"`).
--
-- Founders (the members a conversation is created with, `ev.founding`) are never screened nor counted.
-- Every action goes to the moderators' log (lib/modlog.lua).

local modlog = require("modlog")

-- The texts are in plugins/locales/gatekeeper/<locale>.toml (ctx.t); `texts` in the config overrides one.
local KEYS = {}
for _, k in ipairs({ "ask_group", "mute_reason", "ask", "right", "wrong", "kicked_wrong", "kicked_timeout", "pending",
  "surge", "raid", "wave", "unlocked", "math", "emoji", "no_question" }) do KEYS[k] = true end
local LOCALE = { en = "en", zh = "zh-CN" }

local EMOJI = {
  { "🍎", "apple", "苹果" }, { "🐱", "cat", "猫" }, { "🐶", "dog", "狗" }, { "🚗", "car", "汽车" },
  { "🌙", "moon", "月亮" }, { "⚽", "ball", "足球" }, { "🎸", "guitar", "吉他" }, { "🌵", "cactus", "仙人掌" },
  { "🍌", "banana", "香蕉" }, { "🐟", "fish", "鱼" }, { "🌻", "sunflower", "向日葵" }, { "🚲", "bicycle", "自行车" },
}

-- Compiled once per loaded version.
local cfg, moderators, exempt, screened_in, texts_over
-- In memory, per conversation, for the moderation hook (rebuilt from state at load): members with a
-- question waiting, and whether anything is going on there at all.
local pending_in = {}
-- The conversations with anything going on (questions, recent joins, a lock, raid mode): a mirror of the
-- `active` state key, so that the moderation hook costs one table lookup elsewhere.
local active_in = {}

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do s[v] = true end
  return s
end

local function render(template, vars)
  return (template:gsub("{([%w_]+)}", function(k) return vars[k] ~= nil and tostring(vars[k]) or "{" .. k .. "}" end))
end

-- A text in the language of the member (or conversation) it is about (`language = "auto"`: `who` is
-- {user = uid} or {conv = cid}, nil for the current event's member), or in the configured one(s): "both"
-- is English, then Chinese on its own line. A text set in `texts` wins over the translation.
local function say(ctx, key, vars, who)
  local function one(opts, lang)
    local v = vars
    if key == "wave" then
      v = {}
      for k, x in pairs(vars) do v[k] = x end
      v["until"] = vars.lock > 0 and ctx.t("wave_until", { minutes = vars.lock }, opts) or ""
    end
    local over = texts_over[lang]
    if type(over) == "table" and over[key] then return render(over[key], v) end
    return ctx.t(key, v, opts)
  end
  if cfg.language == "both" then return one({ locale = "en" }, "en") .. "\n" .. one({ locale = "zh-CN" }, "zh") end
  if cfg.language ~= "auto" then return one({ locale = LOCALE[cfg.language] }, cfg.language) end
  return one(who, ctx.t("_lang", nil, who) == "zh" and "zh" or "en")
end

-- Lowercase, trimmed, fullwidth forms as ASCII, no emoji variation selector, no final punctuation.
local function clean(text)
  local out = {}
  if utf8.len(text) then
    for _, cp in utf8.codes(text) do
      if cp >= 0xFF01 and cp <= 0xFF5E then cp = cp - 0xFEE0 elseif cp == 0x3000 then cp = 32 end
      if cp ~= 0xFE0F then out[#out + 1] = utf8.char(cp) end
    end
    text = table.concat(out)
  end
  text = text:lower():gsub("^%s+", ""):gsub("%s+$", "")
  for _, p in ipairs({ "%.", "!", "?", "。", "！", "？" }) do
    text = text:gsub(p .. "$", "")
  end
  return text
end

local function is_moderator(uid, ctx)
  return moderators[uid] or ctx.roles.has(uid, "moderator")
end

local function is_exempt(uid, ctx)
  return uid == ctx.bot or exempt[uid] or is_moderator(uid, ctx)
end

local function screening_on(cid)
  return screened_in == true or (type(screened_in) == "table" and screened_in[cid])
end

-- A question: { text = "...", answers = { ... }, numeric = bool, kind = "math" | "emoji" | "custom" }.
local function new_question(ctx, who)
  local pool = {}
  for _, k in ipairs(cfg.kinds) do pool[#pool + 1] = k end
  for i = 1, #cfg.questions do pool[#pool + 1] = i end
  local pick = pool[math.random(#pool)]
  if pick == "math" then
    local a, b = math.random(2, 9), math.random(2, 9)
    local add = math.random(2) == 1
    if not add and b > a then a, b = b, a end
    local answer = add and a + b or a - b
    return { kind = "math", numeric = true, answers = { tostring(answer) },
             text = say(ctx, "math", { a = a, b = b, op = add and "+" or "-", op_zh = add and "加" or "减" }, who) }
  elseif pick == "emoji" then
    local idx, choices = {}, {}
    while #idx < 4 do
      local i = math.random(#EMOJI)
      local seen = false
      for _, j in ipairs(idx) do seen = seen or j == i end
      if not seen then idx[#idx + 1] = i end
    end
    local right = math.random(4)
    for n, i in ipairs(idx) do choices[#choices + 1] = n .. " " .. EMOJI[i][1] end
    local e = EMOJI[idx[right]]
    return { kind = "emoji", numeric = true, answers = { tostring(right), clean(e[1]), e[2], e[3] },
             text = say(ctx, "emoji", { name = e[2], name_zh = e[3], choices = table.concat(choices, "  "), n = 4 }, who) }
  else
    local q = cfg.questions[pick]
    local lang = cfg.language == "zh" and "zh" or "en"
    if cfg.language == "auto" and ctx.t("_lang", nil, who) == "zh" then lang = "zh" end
    local text = (lang == "zh" and q.q_zh) or q.q
    if cfg.language == "both" and q.q_zh then text = q.q .. " / " .. q.q_zh end
    local answers = {}
    for _, a in ipairs(q.a or {}) do answers[#answers + 1] = clean(tostring(a)) end
    for _, a in ipairs(q.a_zh or {}) do answers[#answers + 1] = clean(tostring(a)) end
    return { kind = "custom", numeric = false, answers = answers, text = text }
  end
end

-- "right", "wrong", or nil when the text does not look like an answer to this question (then it is
-- asked again and no try is used).
local function judge(question, text)
  local t = clean(text)
  if t == "" then return nil end
  for _, a in ipairs(question.answers) do
    if t == a then return "right" end
  end
  if question.kind == "math" and not t:match("^%-?%d+$") then return nil end
  if question.kind == "emoji" and not (t:match("^%d+$") or utf8.len(t) == 1 or #t <= 12) then return nil end
  return "wrong"
end

-- State: per conversation (ctx.state.conv): `joins` (recent joins {u, t, self}), `lock_until` (0: until
-- unlocked), `raid_until`, `pending:<uid>`, `passed:<uid>`; per member (ctx.state.user):
-- `pending` (the conversations where a question waits), `dm` (the 1:1 with the bot); global: `active`
-- (the conversations the sweep looks at).

local function activate(ctx, cid)
  active_in[cid] = true
  local active = ctx.state.get("active") or {}
  if not active[cid] then
    active[cid] = true
    ctx.state.set("active", active)
  end
end

local function user_pending(ctx, uid)
  return ctx.state.user(uid).get("pending") or {}
end

local function set_user_pending(ctx, uid, list)
  ctx.state.user(uid).set("pending", #list > 0 and list or nil)
end

local function clear_pending(ctx, cid, uid)
  ctx.state.conv(cid).delete("pending:" .. uid)
  if pending_in[cid] then pending_in[cid][uid] = nil end
  local list, kept = user_pending(ctx, uid), {}
  for _, c in ipairs(list) do if c ~= cid then kept[#kept + 1] = c end end
  set_user_pending(ctx, uid, kept)
end

local function vars_for(ctx, cid, uid, extra)
  local v = { user = uid, conversation = cid, bot = ctx.bot or "the bot" }
  for k, x in pairs(extra or {}) do v[k] = x end
  return v
end

local function screen(ctx, cid, uid, quiet)
  local who = { user = uid }
  local q = new_question(ctx, who)
  local conv = ctx.state.conv(cid)
  local deadline = ctx.now() + cfg.answer_seconds
  conv.set("pending:" .. uid, { q = q, tries = cfg.tries, ["until"] = deadline })
  pending_in[cid] = pending_in[cid] or {}
  pending_in[cid][uid] = true
  local list = user_pending(ctx, uid)
  list[#list + 1] = cid
  set_user_pending(ctx, uid, list)
  activate(ctx, cid)
  local vars = vars_for(ctx, cid, uid, { question = q.text, minutes = math.ceil(cfg.answer_seconds / 60) })
  ctx.conv(cid).mute(uid, cfg.answer_seconds, say(ctx, "mute_reason", vars, who))
  modlog.post(ctx, { action = "mute", target = uid, cid = cid, rule = "screening",
    reason = "new member, question asked (" .. cfg.answer_seconds .. " s to answer)", by = ctx.plugin,
    undo = ctx.commands.prefix .. "gate pass " .. uid })
  if cfg.ask_in_group and not quiet then ctx.send(cid, say(ctx, "ask_group", vars, who)) end
  -- The 1:1 chat: the one the member opened, or (`dm = true`) the one the host opens with ctx.dm.
  local dm = ctx.state.user(uid).get("dm")
  if dm then
    pcall(ctx.send, dm, say(ctx, "ask", vars, who))
  elseif cfg.dm and ctx.dm then
    ctx.dm(uid, say(ctx, "ask", vars, who))
  end
end

local function pass(ctx, cid, uid, by, reason)
  clear_pending(ctx, cid, uid)
  ctx.state.conv(cid).set("passed:" .. uid, true)
  ctx.conv(cid).unmute(uid, reason)
  modlog.post(ctx, { action = "unmute", target = uid, cid = cid, rule = "screening", reason = reason, by = by })
end

local function remove(ctx, cid, uid, reason, rule)
  clear_pending(ctx, cid, uid)
  ctx.kick(cid, uid, reason)
  modlog.post(ctx, { action = "kick", target = uid, cid = cid, rule = rule, reason = reason, by = ctx.plugin })
end

-- Raid mode's treatment of a joiner.
local function raid_act(ctx, cid, uid, why)
  if cfg.raid_action == "kick" then
    clear_pending(ctx, cid, uid)
    ctx.kick(cid, uid, say(ctx, "raid", {}, { user = uid }))
    modlog.post(ctx, { action = "kick", target = uid, cid = cid, rule = "raid", reason = why, by = ctx.plugin })
  else
    local seconds = math.floor(cfg.raid_mute_minutes * 60)
    -- A question waiting is dropped: raid mode's mute replaces it.
    clear_pending(ctx, cid, uid)
    ctx.conv(cid).mute(uid, seconds, say(ctx, "raid", {}, { user = uid }))
    modlog.post(ctx, { action = "mute", target = uid, cid = cid, rule = "raid", reason = why .. ", " .. seconds .. " s",
      by = ctx.plugin, undo = ctx.commands.prefix .. "gate pass " .. uid })
  end
end

local function raid_on(ctx, cid, minutes, by)
  local conv = ctx.state.conv(cid)
  conv.set("raid_until", ctx.now() + minutes * 60)
  activate(ctx, cid)
  modlog.post(ctx, { action = "raid_on", cid = cid, rule = "raid", reason = minutes .. " min", by = by,
    undo = ctx.commands.prefix .. "gate raid off" })
end

local function raid_off(ctx, cid, by)
  local conv = ctx.state.conv(cid)
  conv.delete("raid_until")
  modlog.post(ctx, { action = "raid_off", cid = cid, rule = "raid", by = by })
end

-- ctx.conv(cid).lock / unlock / locked, when the host has them (it logs a warning otherwise: raid mode
-- still mutes joiners, but the conversation stays open).
local function conv_call(ctx, cid, name, ...)
  local c = ctx.conv(cid)
  if type(c[name]) ~= "function" then
    ctx.log("warning", "gatekeeper: this host cannot " .. name .. " conversations")
    return nil
  end
  return c[name](...)
end

local function lock(ctx, cid, minutes, reason, by)
  local conv = ctx.state.conv(cid)
  conv.set("lock_until", minutes > 0 and ctx.now() + minutes * 60 or 0)
  activate(ctx, cid)
  conv_call(ctx, cid, "lock", reason)
  modlog.post(ctx, { action = "lock", cid = cid, rule = "join_wave", reason = reason, by = by,
    undo = ctx.commands.prefix .. "gate unlock" })
end

local function unlock(ctx, cid, by, reason)
  ctx.state.conv(cid).delete("lock_until")
  conv_call(ctx, cid, "unlock", reason)
  modlog.post(ctx, { action = "unlock", cid = cid, rule = "join_wave", reason = reason, by = by })
end

-- The joins within the wave window, oldest first (the list is trimmed and stored).
local function recent_joins(ctx, cid, add)
  local conv = ctx.state.conv(cid)
  local now, kept, stored = ctx.now(), {}, conv.get("joins") or {}
  for _, j in ipairs(stored) do
    if now - j.t < cfg.wave.seconds then kept[#kept + 1] = j end
  end
  for _, j in ipairs(add or {}) do kept[#kept + 1] = j end
  -- Written only when it changed (the moderation hook reads it for every message of a busy conversation).
  if add or #kept ~= #stored then conv.set("joins", #kept > 0 and kept or nil, cfg.wave.seconds) end
  return kept
end

local function counted(joins)
  local n = 0
  for _, j in ipairs(joins) do if j.c then n = n + 1 end end
  return n
end

local function wave(ctx, cid, joins)
  local n = counted(joins)
  local reason = n .. " joins in " .. cfg.wave.seconds .. " s"
  local already = ctx.state.conv(cid).get("lock_until") ~= nil
  if not already then lock(ctx, cid, cfg.lock_minutes, "join wave: " .. reason, ctx.plugin) end
  local raiding = (ctx.state.conv(cid).get("raid_until") or 0) > ctx.now()
  if not raiding then raid_on(ctx, cid, cfg.raid_minutes, ctx.plugin) end
  -- The members who joined in the wave are treated as raid joiners too.
  local conv = ctx.state.conv(cid)
  for _, j in ipairs(joins) do
    if not j.r and not j.v and not conv.get("passed:" .. j.u) then
      j.r = true
      raid_act(ctx, cid, j.u, "joined in a join wave")
    end
  end
  conv.set("joins", joins, cfg.wave.seconds)
  if not already then
    ctx.send(cid, say(ctx, "wave", vars_for(ctx, cid, nil,
      { joins = n, seconds = cfg.wave.seconds, lock = cfg.lock_minutes, mute = cfg.raid_mute_minutes }), { conv = cid }))
  end
end

-- Expired questions, locks and raid modes; called by a timer (state-driven, so it survives reloads and
-- restarts: a question whose time ran out while the bot was down is settled at the next sweep).
local function sweep(ctx)
  local active = ctx.state.get("active")
  if not active then return end
  local now, changed = ctx.now(), false
  for cid in pairs(active) do
    local conv = ctx.state.conv(cid)
    local busy = false
    for _, key in ipairs(conv.keys("pending:")) do
      local p = conv.get(key)
      local uid = key:sub(9)
      if p and p["until"] <= now then
        remove(ctx, cid, uid, say(ctx, "kicked_timeout", {}, { user = uid }), "screening")
      else
        busy = true
      end
    end
    local lock_until = conv.get("lock_until")
    if lock_until and lock_until > 0 and lock_until <= now then
      unlock(ctx, cid, ctx.plugin, "cool-down over")
      ctx.send(cid, say(ctx, "unlocked", vars_for(ctx, cid), { conv = cid }))
    elseif lock_until then
      busy = true
    end
    local raid_until = conv.get("raid_until")
    if raid_until and raid_until <= now then
      raid_off(ctx, cid, ctx.plugin)
    elseif raid_until then
      busy = true
    end
    if not busy and #recent_joins(ctx, cid) == 0 then
      active[cid] = nil
      active_in[cid] = nil
      changed = true
    end
  end
  if changed then ctx.state.set("active", next(active) and active or nil) end
end

local function answer(ctx, uid, text, reply)
  local list = user_pending(ctx, uid)
  local cid = list[1]
  if not cid then return false end
  local conv = ctx.state.conv(cid)
  local p = conv.get("pending:" .. uid)
  if not p then
    clear_pending(ctx, cid, uid)
    return false
  end
  local vars = vars_for(ctx, cid, uid, { question = p.q.text })
  local verdict = judge(p.q, text)
  if verdict == "right" then
    pass(ctx, cid, uid, ctx.plugin, "answered the new-member question")
    reply(say(ctx, "right", vars, { user = uid }))
  elseif verdict == "wrong" then
    p.tries = p.tries - 1
    if p.tries <= 0 then
      remove(ctx, cid, uid, say(ctx, "kicked_wrong", {}, { user = uid }), "screening")
    else
      conv.set("pending:" .. uid, p)
      vars.tries = p.tries
      reply(say(ctx, "wrong", vars, { user = uid }))
    end
  else
    reply(say(ctx, "ask", vars, { user = uid }))
  end
  return true
end

local function status(ctx, cid)
  local conv, now = ctx.state.conv(cid), ctx.now()
  local parts = {}
  local lock_until = conv.get("lock_until")
  local locked = lock_until ~= nil
  local c = ctx.conv(cid)
  if c.locked then locked = c.locked() end
  if locked then
    parts[#parts + 1] = "locked (invite-only" ..
      ((lock_until or 0) > 0 and (", unlocks in " .. math.ceil((lock_until - now) / 60) .. " min") or "") .. ")"
  else
    parts[#parts + 1] = "open"
  end
  local raid_until = conv.get("raid_until")
  if raid_until and raid_until > now then
    parts[#parts + 1] = "raid mode on (" .. math.ceil((raid_until - now) / 60) .. " min left, joiners " ..
      (cfg.raid_action == "kick" and "kicked" or ("muted " .. cfg.raid_mute_minutes .. " min")) .. ")"
  else
    parts[#parts + 1] = "raid mode off"
  end
  parts[#parts + 1] = "screening " .. (screening_on(cid) and ("on (" .. #conv.keys("pending:") .. " waiting)") or "off")
  parts[#parts + 1] = "joins in the last " .. cfg.wave.seconds .. " s: " .. counted(recent_joins(ctx, cid)) ..
    "/" .. cfg.wave.joins
  return "gate in " .. cid .. ": " .. table.concat(parts, "; ")
end

local function gate_command(ctx, cid, from, args, reply)
  local g = ctx.commands.prefix .. "gate"
  local action, arg, arg2 = args.action, args.arg, args.arg2
  local conv = ctx.state.conv(cid)
  if action == "status" or action == nil then
    return reply(status(ctx, cid))
  elseif action == "unlock" then
    unlock(ctx, cid, from, "unlocked by " .. from)
    return reply(cid .. " is open to new members again")
  elseif action == "lock" then
    local minutes = tonumber(arg) or cfg.lock_minutes
    lock(ctx, cid, minutes, "locked by " .. from, from)
    return reply(cid .. " is invite-only" .. (minutes > 0 and (" for " .. minutes .. " min") or " until !gate unlock"))
  elseif action == "raid" and arg == "on" then
    local minutes = tonumber(arg2) or cfg.raid_minutes
    if minutes <= 0 then return reply("usage: " .. g .. " raid on [minutes]") end
    raid_on(ctx, cid, minutes, from)
    return reply("raid mode on in " .. cid .. " for " .. minutes .. " min: new members are " ..
      (cfg.raid_action == "kick" and "removed" or ("muted for " .. cfg.raid_mute_minutes .. " min")))
  elseif action == "raid" and arg == "off" then
    raid_off(ctx, cid, from)
    return reply("raid mode off in " .. cid)
  elseif action == "pass" and arg and arg ~= "" then
    local uid = arg:gsub("^@", "")
    pass(ctx, cid, uid, from, "let in by " .. from)
    return reply(uid .. " may post in " .. cid .. " now")
  end
  return reply(string.format("usage: %s status | %s lock [minutes] | %s unlock | %s raid on [minutes] | %s raid off | %s pass <user>",
    g, g, g, g, g, g))
end

return {
  name = "gatekeeper",
  priority = 110, -- before moderation: a raid's messages are refused here first
  config = {
    screening = false,        -- true: question new members in every conversation; or a list of conversation ids
    answer_seconds = 300,     -- time to answer (the server mute lasts this long); then the member is removed
    tries = 3,                -- wrong answers before the member is removed
    kinds = { "math", "emoji" }, -- built-in questions; {} for only your own
    questions = {},           -- your own: { q = "...", a = { "...", ... }, q_zh = "...", a_zh = { ... } }
    language = "auto",        -- "auto": each member's own (ctx.t, !lang, attrs.lang); or always "en", "zh" or "both"
    dm = true,                -- ask in a 1:1 chat the bot opens with the member (ctx.dm); the answer is taken there
    ask_in_group = false,     -- also post the question in the group, with a mention (the fallback for clients
                              -- that show no 1:1 chats: set dm = false, ask_in_group = true; !answer works anywhere)
    wave = { joins = 10, seconds = 10, surge = 3, invited = false }, -- a join wave; `invited`: count members added by others too
    lock_minutes = 15,        -- a wave's lock ends after this long (0: until !gate unlock)
    raid_minutes = 30,        -- raid mode after a wave (and the default of !gate raid on)
    raid_action = "mute",     -- what raid mode does to a joiner: "mute" or "kick"
    raid_mute_minutes = 60,
    moderators = {},          -- hold the moderator role (!gate) and are never screened
    exempt = {},              -- never screened nor counted (other bots)
    code = 4340,              -- application error code of the messages this plugin refuses
    sweep_seconds = 2,        -- how often expired questions, locks and raid modes are settled
    texts = {},               -- your wording: { en = { ask_group = "..." }, zh = { ... } } (keys as in locales/gatekeeper/)
    modlog = false,           -- a conversation id: post every action there (lib/modlog.lua)
  },

  on_load = function(ctx)
    local c = ctx.config
    local function bad(key, why) error("plugins.gatekeeper." .. key .. ": " .. why, 0) end
    if c.screening ~= false and c.screening ~= true and type(c.screening) ~= "table" then
      bad("screening", "must be true, false or a list of conversation ids")
    end
    for _, key in ipairs({ "answer_seconds", "tries", "raid_mute_minutes", "raid_minutes", "sweep_seconds" }) do
      if type(c[key]) ~= "number" or c[key] <= 0 then bad(key, "must be a number above 0") end
    end
    if type(c.lock_minutes) ~= "number" or c.lock_minutes < 0 then bad("lock_minutes", "must be 0 or more") end
    if type(c.wave) ~= "table" then bad("wave", "must be a table {joins, seconds, surge}") end
    for _, key in ipairs({ "joins", "seconds" }) do
      if type(c.wave[key]) ~= "number" or c.wave[key] < 1 then bad("wave." .. key, "must be a number, at least 1") end
    end
    if c.wave.surge ~= false and (type(c.wave.surge) ~= "number" or c.wave.surge < 1) then
      bad("wave.surge", "must be a number, at least 1 (or false)")
    end
    if c.raid_action ~= "mute" and c.raid_action ~= "kick" then bad("raid_action", "must be \"mute\" or \"kick\"") end
    if c.language ~= "auto" and c.language ~= "en" and c.language ~= "zh" and c.language ~= "both" then
      bad("language", "must be \"auto\", \"en\", \"zh\" or \"both\"")
    end
    for _, k in ipairs(c.kinds) do
      if k ~= "math" and k ~= "emoji" then bad("kinds", "'" .. tostring(k) .. "' is not math or emoji") end
    end
    for i, q in ipairs(c.questions) do
      if type(q) ~= "table" or type(q.q) ~= "string" or type(q.a) ~= "table" or #q.a == 0 then
        bad("questions[" .. i .. "]", "must be { q = \"question\", a = { \"answer\", ... } }")
      end
    end
    if #c.kinds == 0 and #c.questions == 0 then bad("kinds", "no questions: list a kind or add questions") end
    for lang, t in pairs(c.texts) do
      if not LOCALE[lang] or type(t) ~= "table" then bad("texts." .. tostring(lang), "must be en or zh, a table of texts") end
      for key in pairs(t) do
        if not KEYS[key] then bad("texts." .. lang .. "." .. tostring(key), "no such text") end
      end
    end
    cfg = c
    texts_over = c.texts
    moderators, exempt = set_of(c.moderators), set_of(c.exempt)
    screened_in = c.screening == true or (type(c.screening) == "table" and set_of(c.screening)) or false
    for uid in pairs(moderators) do ctx.roles.grant(uid, "moderator") end
    -- Questions waiting, from state (they outlive reloads and restarts).
    pending_in, active_in = {}, {}
    for cid in pairs(ctx.state.get("active") or {}) do
      active_in[cid] = true
      for _, key in ipairs(ctx.state.conv(cid).keys("pending:")) do
        pending_in[cid] = pending_in[cid] or {}
        pending_in[cid][key:sub(9)] = true
      end
    end
    ctx.every(c.sweep_seconds, sweep)
    ctx.commands.add{
      name = "gate", args = "[action] [arg] [arg2]", roles = { "moderator", "manager" },
      description = "status, lock [minutes], unlock, raid on [minutes], raid off, pass <user>",
      run = function(args, msg, ctx) gate_command(ctx, msg.cid, msg.from, args, ctx.reply) end,
    }
    ctx.commands.add{
      name = "answer", args = "<answer:text>", description = "answer the new-member question",
      run = function(args, msg, ctx)
        if not answer(ctx, msg.from, args.answer, ctx.reply) then ctx.reply(say(ctx, "no_question", {})) end
      end,
    }
  end,

  -- Refuses, before delivery, what the server's mute may not have caught yet (the mute is asked for when
  -- the join event arrives; a message can be faster): members with a question waiting, raid joiners, and
  -- the members who joined during a surge of joins.
  moderation = function(msg, ctx)
    local cid, uid = msg.cid, msg.from
    local waiting = pending_in[cid]
    if waiting and waiting[uid] then
      return ctx.block(say(ctx, "pending", vars_for(ctx, cid, uid)), { code = cfg.code })
    end
    if not active_in[cid] then return nil end
    local joins = recent_joins(ctx, cid)
    local surge = cfg.wave.surge and counted(joins) >= cfg.wave.surge
    for _, j in ipairs(joins) do
      if j.u == uid and (j.r or (surge and not j.v)) then
        return ctx.block(say(ctx, j.r and "raid" or "surge", {}), { code = cfg.code })
      end
    end
    return nil
  end,

  on_member_joined = function(ev, ctx)
    if ev.founding then return end
    local cid, now = ev.cid, ctx.now()
    local conv = ctx.state.conv(cid)
    local added = {}
    for _, uid in ipairs(ev.members) do
      if not is_exempt(uid, ctx) then
        local self_join = ev.by == nil or ev.by == uid
        -- Added by the bot or a moderator: vouched for, neither screened nor held.
        local vouched = not self_join and (ev.by == ctx.bot or is_moderator(ev.by, ctx)) or nil
        added[#added + 1] = { u = uid, t = now, c = self_join or cfg.wave.invited == true, v = vouched }
      end
    end
    if #added == 0 then return end
    activate(ctx, cid)
    local joins = recent_joins(ctx, cid, added)
    local n = counted(joins)
    -- A wave mutes (or removes) everyone who joined in it, these members included.
    if n >= cfg.wave.joins then return wave(ctx, cid, joins) end
    local raiding = (conv.get("raid_until") or 0) > now
    local surge = cfg.wave.surge and n >= cfg.wave.surge
    for _, j in ipairs(added) do
      if j.v then
        -- nothing to do
      elseif raiding then
        j.r = true
        raid_act(ctx, cid, j.u, "joined during raid mode")
      elseif screening_on(cid) and not conv.get("passed:" .. j.u) then
        -- During a surge the question is not posted in the group (it stays quiet); the mute's reason
        -- and the 1:1 chat carry it.
        screen(ctx, cid, j.u, surge)
      end
    end
    if raiding then conv.set("joins", joins, cfg.wave.seconds) end
  end,

  on_member_left = function(ev, ctx)
    for _, uid in ipairs(ev.members) do
      if ctx.state.conv(ev.cid).get("pending:" .. uid) then clear_pending(ctx, ev.cid, uid) end
    end
  end,

  -- A member who opens a 1:1 chat with the bot answers there; a question waiting is asked at once.
  on_invited = function(ev, ctx)
    if not ev.by or ev.by == ctx.bot then return end
    ctx.state.user(ev.by).set("dm", ev.cid)
    local cid = user_pending(ctx, ev.by)[1]
    local p = cid and ctx.state.conv(cid).get("pending:" .. ev.by)
    if p then ctx.send(ev.cid, say(ctx, "ask", vars_for(ctx, cid, ev.by, { question = p.q.text }), { user = ev.by })) end
  end,

  -- An answer in the 1:1 chat with the bot: the one the member opened (on_invited), or the one the host
  -- opened to ask (ctx.dm_conversation).
  on_receive = function(msg, ctx)
    if not msg.text or msg.text == "" then return end
    if ctx.state.user(msg.from).get("dm") ~= msg.cid
      and not (ctx.dm_conversation and ctx.dm_conversation(msg.from) == msg.cid) then
      return
    end
    answer(ctx, msg.from, msg.text, ctx.reply)
  end,
}
