-- Greets members who join, says goodbye when they leave, and remembers when
-- each member first joined each conversation (so returning members get a
-- "welcome back"). The founders of a conversation (the members it was created
-- with, ev.founding) are not joiners: nobody is greeted when a group is created.
--
-- Templates: {user}, {conversation}, {by}, {first} (first-join date, UTC). The texts are translated
-- (plugins/locales/welcome/<locale>.toml): a joiner is greeted in their own language (`!lang`, their
-- client's attrs.lang), a goodbye is said in the conversation's. A text set in the config is used as it
-- is, in every language; "" says nothing.
--
-- Raiders are not greeted: a greeting waits `hold_seconds` (hookbot.toml: 2), then is skipped when the conversation is
-- locked (gatekeeper's lock during a join wave), the joiner is muted (gatekeeper's raid mode or screening),
-- or `quiet.joins` members joined by themselves within `quiet.seconds` (a wave as it starts).

local function render(template, vars)
  return (template:gsub("{(%w+)}", function(k) return vars[k] and tostring(vars[k]) or "{" .. k .. "}" end))
end

-- The configured text for `key`, or its translation (`false`: translated); nil when it is "" (none).
local function say(ctx, key, vars, opts)
  local configured = ctx.config[key]
  if configured == "" then return nil end
  if type(configured) == "string" then return render(configured, vars) end
  return ctx.t(key, vars, opts)
end

-- Recent self-join times per conversation.
local waves = {}

-- Whether greeting `uid` in `cid` now would greet a raider.
local function raid_like(ctx, cid, uid)
  local conv = ctx.conv(cid)
  if conv.locked() then return true end
  local n, now = 0, ctx.now()
  for _, t in ipairs(waves[cid] or {}) do
    if now - t < ctx.config.quiet.seconds then n = n + 1 end
  end
  if n >= ctx.config.quiet.joins then return true end
  for _, m in ipairs(conv.muted()) do
    if m.user == uid then return true end
  end
  return false
end

local function greet(ctx, cid, uid, text)
  local function go(ctx)
    if not raid_like(ctx, cid, uid) then ctx.send(cid, text) end
  end
  if ctx.config.hold_seconds > 0 then ctx.after(ctx.config.hold_seconds, go) else go(ctx) end
end

return {
  name = "welcome",
  config = {
    -- false: the translated text (locales/welcome/*.toml); a string: that text in every language; "": none
    greeting = false,   -- "Welcome, {user}!"
    returning = false,  -- "Welcome back, {user}! You first joined on {first}."
    goodbye = false,    -- "Goodbye, {user}."
    removed = false,    -- "{user} was removed by {by}."
    intro = false,      -- when the bot is added: "Hi! I am a bot. Say !help to see what I can do."
    skip = { "modbot" },                                        -- never greeted (bots)
    hold_seconds = 0,   -- greet this long after the join, unless locked, muted or a wave by then (0: at once;
                        -- hookbot.toml has 2, so that gatekeeper's raid-mode and screening mutes are seen)
    quiet = { joins = 3, seconds = 10 },  -- this many self-joins within the window: a wave, nobody greeted
  },

  on_member_joined = function(ev, ctx)
    if ev.founding then return end
    local skip = {}
    for _, s in ipairs(ctx.config.skip) do skip[s] = true end
    if ctx.bot then skip[ctx.bot] = true end
    -- Self-joins (bots aside) per conversation within the quiet window (in memory: a wave is seconds long).
    local now, q = ctx.now(), ctx.config.quiet
    local kept = {}
    for _, t in ipairs(waves[ev.cid] or {}) do if now - t < q.seconds then kept[#kept + 1] = t end end
    for _, uid in ipairs(ev.members) do
      if not skip[uid] and (ev.by == nil or ev.by == uid) then kept[#kept + 1] = now end
    end
    waves[ev.cid] = #kept > 0 and kept or nil
    local conv = ctx.state.conv(ev.cid)
    for _, uid in ipairs(ev.members) do
      if not skip[uid] then
        local first = conv.get("first:" .. uid)
        local vars = { user = uid, conversation = ev.cid, by = ev.by }
        conv.incr("joins:" .. uid)
        local text
        if first then
          vars.first = os.date("!%Y-%m-%d", first)
          text = say(ctx, "returning", vars, { user = uid })
        else
          conv.set("first:" .. uid, ctx.now())
          text = say(ctx, "greeting", vars, { user = uid })
        end
        if text then greet(ctx, ev.cid, uid, text) end
      end
    end
  end,

  on_member_left = function(ev, ctx)
    for _, uid in ipairs(ev.members) do
      local vars = { user = uid, conversation = ev.cid, by = ev.by }
      local text = say(ctx, (ev.by and ev.by ~= uid) and "removed" or "goodbye", vars, { conv = ev.cid })
      if text then ctx.reply(text) end
    end
  end,

  on_invited = function(ev, ctx)
    local text = say(ctx, "intro", { conversation = ev.cid, by = ev.by, prefix = ctx.commands.prefix })
    if text then ctx.reply(text) end
  end,
}
