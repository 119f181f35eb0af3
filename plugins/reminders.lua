-- Reminders on ctx.schedule: they are kept in the bot's state file, so they survive reloads and
-- restarts (a one-off reminder that fell due while the bot was down is sent late, marked so).
--
--   !remind me in 10m drink water          !remind me 10分钟后 喝水
--   !remind me at 18:30 call mum           !remind me 18:30 给妈妈打电话      (today, else tomorrow)
--   !remind me tomorrow 9:00 dentist       !remind me 明天 9:00 看牙医
--   !remind me at 2026-12-24 20:00 gifts
--   !remind here every day 8:00 stand up   !remind here 每天 8:00 站会
--   !remind #lobby every monday 9:00 standup          (weekday names: mon…sun, weekday, weekend)
--   !remind #lobby 每周一 9:00 周会        !remind here every 2h stretch
--   !remind list                            !remind cancel 3      (也可: !remind 列表, !remind 取消 3)
--
-- "me" mentions the member in this conversation, "here" posts to this conversation, "#name" posts to the
-- conversation `conversations.name` names in the config (or to the conversation with that id). Times are
-- read in `tz`. Replies are in Chinese when the command has Chinese in it, else in English.

local text_util = require("text")

local WEEKDAYS = {
  sun = 0, sunday = 0, sundays = 0, mon = 1, monday = 1, mondays = 1, tue = 2, tues = 2, tuesday = 2, tuesdays = 2,
  wed = 3, wednesday = 3, wednesdays = 3, thu = 4, thur = 4, thurs = 4, thursday = 4, thursdays = 4,
  fri = 5, friday = 5, fridays = 5, sat = 6, saturday = 6, saturdays = 6,
}
local DAY_NAMES = { [0] = "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" }
local ZH_DAYS = { ["一"] = 1, ["二"] = 2, ["三"] = 3, ["四"] = 4, ["五"] = 5, ["六"] = 6, ["日"] = 0, ["天"] = 0 }
local ZH_DAY_NAMES = { [0] = "日", "一", "二", "三", "四", "五", "六" }
local UNITS = {
  s = 1, sec = 1, secs = 1, second = 1, seconds = 1, m = 60, min = 60, mins = 60, minute = 60, minutes = 60,
  h = 3600, hr = 3600, hrs = 3600, hour = 3600, hours = 3600, d = 86400, day = 86400, days = 86400,
  w = 604800, week = 604800, weeks = 604800,
}
local ZH_UNITS = { { "分钟", 60 }, { "小时", 3600 }, { "秒钟", 1 }, { "秒", 1 }, { "天", 86400 }, { "周", 604800 },
  { "个小时", 3600 }, { "分", 60 } }

local TEXTS = {
  en = {
    usage = "usage: !remind me|here|#conversation in 10m|at 18:30|tomorrow 9:00|every monday 9:00|every 2h <text>; !remind list; !remind cancel <id>",
    set_at = "OK, reminder #{id} at {when} ({tz}): {text}",
    set_every = "OK, reminder #{id} {when} ({tz}): {text}",
    fire_me = "⏰ @{to} reminder: {text}",
    fire = "⏰ Reminder: {text}",
    late = " (late: it was due at {when})",
    none = "You have no reminders.",
    list_head = "Your reminders:",
    item = "#{id} {when} → {where}: {text} (next {next})",
    cancelled = "Reminder #{id} cancelled.",
    no_such = "You have no reminder #{id}.",
    too_many = "You have {n} reminders already (the most is {max}); cancel one first (!remind cancel <id>).",
    full = "The bot keeps {max} reminders at most; try again later.",
    too_long = "That reminder is too long ({n} bytes; at most {max}).",
    no_text = "What should I remind you of? Put the text after the time.",
    past = "{when} has already passed.",
    too_often = "Repeating reminders can be at most every {min} minutes.",
    bad_where = "Unknown conversation '{name}'.",
    bad_when = "I did not understand when.",
  },
  zh = {
    usage = "用法：!remind me|here|#会话 10分钟后|18:30|明天 9:00|每天 8:00|每周一 9:00 <内容>；!remind 列表；!remind 取消 <编号>",
    set_at = "好的，提醒 #{id}：{when}（{tz}）{text}",
    set_every = "好的，提醒 #{id}：{when}（{tz}）{text}",
    fire_me = "⏰ @{to} 提醒：{text}",
    fire = "⏰ 提醒：{text}",
    late = "（晚了，原定 {when}）",
    none = "你还没有提醒。",
    list_head = "你的提醒：",
    item = "#{id} {when} → {where}：{text}（下次 {next}）",
    cancelled = "提醒 #{id} 已取消。",
    no_such = "你没有提醒 #{id}。",
    too_many = "你已经有 {n} 个提醒（最多 {max} 个），请先取消一个（!remind 取消 <编号>）。",
    full = "机器人最多保存 {max} 个提醒，请稍后再试。",
    too_long = "提醒内容太长（{n} 字节，最多 {max}）。",
    no_text = "要提醒什么？请在时间后面写上内容。",
    past = "{when} 已经过去了。",
    too_often = "重复提醒最短间隔 {min} 分钟。",
    bad_where = "不认识的会话“{name}”。",
    bad_when = "没看懂时间。",
  },
}

local function say(lang, key, vars)
  local t = (TEXTS[lang] or TEXTS.en)[key] or TEXTS.en[key]
  return (t:gsub("{(%w+)}", function(k)
    local v = vars and vars[k]
    if v == nil then return "{" .. k .. "}" end
    return tostring(v)
  end))
end

-- Chinese when the text has a character of the CJK block (UTF-8 lead bytes E4–E9), else English.
local function lang_of(s)
  if s:find("[\228-\233][\128-\191][\128-\191]") then return "zh" end
  return "en"
end

local function two(n) return (n < 10 and "0" or "") .. n end

-- "2026-11-30 09:00" in `tz`.
local function local_time(ctx, t, tz)
  local d = ctx.schedule.date(t, tz)
  return d.year .. "-" .. two(d.month) .. "-" .. two(d.day) .. " " .. two(d.hour) .. ":" .. two(d.min)
end

-- "1h30m", "10m", "90s" (compact), or nil.
local function compact_duration(s)
  if not s:match("^%d[%dsmhdw]*$") or (s:gsub("%d+[smhdw]", "")) ~= "" then return nil end
  local total = 0
  for n, u in s:gmatch("(%d+)([smhdw])") do total = total + tonumber(n) * UNITS[u] end
  return total > 0 and total or nil
end

-- A duration at the start of `s` ("10m …", "2 hours …", "1h30m …"): seconds and the rest.
local function leading_duration(s)
  local word, rest = s:match("^(%S+)%s*(.*)$")
  if not word then return nil end
  local c = compact_duration(word)
  if c then return c, rest end
  local n, unit, rest2 = s:match("^(%d+)%s*(%a+)%s*(.*)$")
  if n and UNITS[unit:lower()] then return tonumber(n) * UNITS[unit:lower()], rest2 end
  -- Chinese: "10分钟后 …", "2小时后 …" (后 is left out after 每)
  for _, u in ipairs(ZH_UNITS) do
    local m, r = s:match("^(%d+)%s*" .. u[1] .. "(.*)$")
    if m then
      if r:sub(1, #"后") == "后" then r = r:sub(#"后" + 1) end
      return tonumber(m) * u[2], text_util.trim(r)
    end
  end
  return nil
end

-- "18:30 …" / "9:00 …" / "18点30 …" / "9点 …": hour, minute and the rest.
local function leading_clock(s)
  local h, m, rest = s:match("^(%d%d?):(%d%d)%s*(.*)$")
  if not h then
    h, m, rest = s:match("^(%d%d?)点(%d%d?)分?%s*(.*)$")
  end
  if not h then
    h, rest = s:match("^(%d%d?)点%s*(.*)$")
    m = h and "0"
  end
  h, m = tonumber(h), tonumber(m)
  if h and h < 24 and m < 60 then return h, m, rest end
  return nil
end

local function strip_word(s, words)
  for _, w in ipairs(words) do
    local lower = s:lower()
    if lower:sub(1, #w) == w then
      local after = s:sub(#w + 1)
      if after == "" or after:match("^%s") or w:byte(1) > 127 then return text_util.trim(after), true end
    end
  end
  return s, false
end

-- Reads "when" at the start of `s`: a table describing the job and the rest of the text, or nil and why.
local function parse_when(ctx, s, tz)
  local rest, every = strip_word(s, { "every", "每隔", "每" })
  if every then
    -- every day / weekday / weekend / monday / 2h; 每天 / 每周一 / 工作日 / 每2小时
    local r, day = strip_word(rest, { "day", "days", "天", "日" })
    local dow, label, label_zh = nil, "every day", "每天"
    if day then
      dow, rest = "*", r
    else
      r, day = strip_word(rest, { "weekday", "weekdays", "工作日", "个工作日" })
      if day then
        dow, rest, label, label_zh = "1-5", r, "every weekday", "工作日"
      else
        r, day = strip_word(rest, { "weekend", "weekends", "周末" })
        if day then
          dow, rest, label, label_zh = "0,6", r, "every weekend", "周末"
        else
          local word, r2 = rest:match("^(%a+)%s*(.*)$")
          if word and WEEKDAYS[word:lower()] then
            local n = WEEKDAYS[word:lower()]
            dow, rest, label, label_zh = tostring(n), r2, "every " .. DAY_NAMES[n], "每周" .. ZH_DAY_NAMES[n]
          else
            for zh, n in pairs(ZH_DAYS) do
              local r3 = rest:match("^周" .. zh .. "%s*(.*)$") or rest:match("^星期" .. zh .. "%s*(.*)$")
              if r3 then dow, rest, label, label_zh = tostring(n), r3, "every " .. DAY_NAMES[n], "每周" .. zh end
            end
          end
        end
      end
    end
    if dow then
      local h, m, r4 = leading_clock(rest)
      if not h then return nil, "bad_when" end
      return { kind = "cron", expr = m .. " " .. h .. " * * " .. dow,
               label = label .. " " .. two(h) .. ":" .. two(m), label_zh = label_zh .. " " .. two(h) .. ":" .. two(m) }, r4
    end
    local secs, r5 = leading_duration(rest)
    if not secs then return nil, "bad_when" end
    return { kind = "every", seconds = secs, label = "every " .. rest:sub(1, #rest - #r5):gsub("%s+$", ""),
             label_zh = "每" .. rest:sub(1, #rest - #r5):gsub("%s+$", "") }, r5
  end
  local r, isin = strip_word(s, { "in" })
  local secs, r2 = leading_duration(isin and r or s)
  if secs then return { kind = "at", time = ctx.now() + secs }, r2 end
  -- at 18:30 / tomorrow 9:00 / 2026-12-24 20:00 / 明天 9:00
  r = strip_word(s, { "at", "在" })
  local r3, tomorrow = strip_word(r, { "tomorrow", "明天" })
  local date, r4 = r3:match("^(%d%d%d%d%-%d%d%-%d%d)%s*(.*)$")
  if date then
    local h, m, r5 = leading_clock(r4)
    if not h then h, m, r5 = 9, 0, r4 end
    return { kind = "at", iso = date .. "T" .. two(h) .. ":" .. two(m) .. ":00" }, r5
  end
  local h, m, r6 = leading_clock(r3)
  if not h then return nil, "bad_when" end
  local after = ctx.now()
  if tomorrow then after = ctx.schedule.next("0 0 * * *", tz) end
  return { kind = "at", time = ctx.schedule.next(m .. " " .. h .. " * * *", tz, after) }, r6
end

local function mine(ctx, uid)
  local out = {}
  for _, job in ipairs(ctx.schedule.list()) do
    if type(job.data) == "table" and job.data.by == uid then out[#out + 1] = job end
  end
  return out
end

local function where_label(data)
  if data.to then return "@" .. data.to end
  return data.name and ("#" .. data.name) or data.cid
end

local function remind(args, msg, ctx)
  local cfg = ctx.config
  local tz = cfg.tz
  local input = text_util.trim(args.what or "")
  local lang = lang_of(input)
  local function reply(key, vars) ctx.reply(say(lang, key, vars)) end
  if input == "" then return reply("usage") end

  local rest, listing = strip_word(input, { "list", "列表" })
  if listing and rest == "" then
    local jobs = mine(ctx, msg.from)
    if #jobs == 0 then return reply("none") end
    local lines = { say(lang, "list_head") }
    for _, job in ipairs(jobs) do
      lines[#lines + 1] = say(lang, "item", { id = job.id, when = lang == "zh" and job.data.label_zh or job.data.label,
        where = where_label(job.data), text = job.data.text, next = local_time(ctx, job.next, job.tz) })
    end
    return ctx.reply(table.concat(lines, "\n"))
  end
  local id
  rest, id = strip_word(input, { "cancel", "取消", "delete" })
  if id then
    local job
    for _, j in ipairs(ctx.schedule.list()) do
      if j.id == rest:gsub("^#", "") then job = j end
    end
    local moderator = ctx.roles.has(msg.from, "moderator")
    for _, m in ipairs(cfg.moderators or {}) do moderator = moderator or m == msg.from end
    local allowed = job and type(job.data) == "table" and (job.data.by == msg.from or moderator)
    if not allowed then return reply("no_such", { id = rest:gsub("^#", "") }) end
    ctx.schedule.cancel(job.id)
    return reply("cancelled", { id = job.id })
  end

  -- target
  local target, after = input:match("^(%S+)%s*(.*)$")
  local data = { by = msg.from, lang = lang, tz = tz }
  local lower = target:lower()
  if lower == "me" or target == "我" then
    data.cid, data.to = msg.cid, msg.from
  elseif lower == "here" or target == "这里" then
    data.cid = msg.cid
  elseif target:sub(1, 1) == "#" and #target > 1 then
    local name = target:sub(2)
    data.name = name
    data.cid = (cfg.conversations or {})[name]
    if not data.cid then
      if not cfg.any_conversation then return reply("bad_where", { name = name }) end
      data.cid = name
    end
  else
    return reply("usage")
  end

  local when, text = parse_when(ctx, after, tz)
  if not when then return ctx.reply(say(lang, "bad_when") .. "\n" .. say(lang, "usage")) end
  text = text_util.trim(text or "")
  if text == "" then return reply("no_text") end
  if #text > cfg.max_text then return reply("too_long", { n = #text, max = cfg.max_text }) end
  local count = #mine(ctx, msg.from)
  if count >= cfg.max_per_member then return reply("too_many", { n = count, max = cfg.max_per_member }) end
  if #ctx.schedule.list() >= cfg.max_total then return reply("full", { max = cfg.max_total }) end
  data.text = text

  local newid
  if when.kind == "at" then
    if when.iso then
      -- a date and time read in tz by the host; one already past is refused
      data.label = when.iso:gsub("T", " "):sub(1, 16)
      newid = ctx.schedule.at(when.iso, "remind", data, { tz = tz })
      for _, j in ipairs(ctx.schedule.list()) do
        if j.id == newid and j.next <= ctx.now() then
          ctx.schedule.cancel(newid)
          return reply("past", { when = data.label })
        end
      end
    else
      data.label = local_time(ctx, when.time, tz)
      newid = ctx.schedule.at(when.time, "remind", data, { tz = tz })
    end
    return reply("set_at", { id = newid, when = data.label, tz = tz, text = text })
  end
  data.label, data.label_zh = when.label, when.label_zh
  if when.kind == "every" then
    if when.seconds < cfg.min_interval_minutes * 60 then return reply("too_often", { min = cfg.min_interval_minutes }) end
    newid = ctx.schedule.every(when.seconds, "remind", data, { tz = tz })
  else
    newid = ctx.schedule.cron(when.expr, "remind", data, { tz = tz })
  end
  return reply("set_every", { id = newid, when = lang == "zh" and when.label_zh or when.label, tz = tz, text = text })
end

return {
  name = "reminders",
  config = {
    tz = "UTC",                 -- the time zone times are read in (an IANA name: Asia/Shanghai, Europe/Paris)
    conversations = {},         -- names for "#name": { lobby = "<conversation id>" }
    any_conversation = false,   -- let "#<id>" name any conversation id, not only those in `conversations`
    max_per_member = 20,
    max_total = 500,
    max_text = 500,             -- bytes
    min_interval_minutes = 5,   -- the shortest "every …"
    moderators = {},            -- may cancel anyone's reminder (as may the role `moderator`)
  },

  on_load = function(ctx)
    ctx.commands.add{ name = "remind", args = "[what:text]",
      description = "me|here|#conv in 10m|at 18:30|every monday 9:00 <text>; list; cancel <id>",
      run = remind }
  end,

  -- Called by ctx.schedule, by name, so it survives reloads and restarts.
  schedules = {
    remind = function(data, ctx, info)
      local key = data.to and "fire_me" or "fire"
      local text = say(data.lang, key, { to = data.to, text = data.text })
      if info.catch_up then text = text .. say(data.lang, "late", { when = local_time(ctx, info.scheduled, data.tz) }) end
      ctx.send(data.cid, text)
    end,
  },
}
