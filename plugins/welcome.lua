-- Greets members who join, says goodbye when they leave, and remembers when
-- each member first joined each conversation (so returning members get a
-- "welcome back"). The founders of a conversation (the members it was created
-- with, ev.founding) are not joiners: nobody is greeted when a group is created.
--
-- Templates: {user}, {conversation}, {by}, {first} (first-join date, UTC). The texts are translated
-- (plugins/locales/welcome/<locale>.toml): a joiner is greeted in their own language (`!lang`, their
-- client's attrs.lang), a goodbye is said in the conversation's. A text set in the config is used as it
-- is, in every language; "" says nothing.

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
  },

  on_member_joined = function(ev, ctx)
    if ev.founding then return end
    local skip = {}
    for _, s in ipairs(ctx.config.skip) do skip[s] = true end
    if ctx.bot then skip[ctx.bot] = true end
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
        if text then ctx.reply(text) end
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
