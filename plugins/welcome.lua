-- Greets members who join, says goodbye when they leave, and remembers when
-- each member first joined each conversation (so returning members get a
-- "welcome back"). The founders of a conversation (the members it was created
-- with, ev.founding) are not joiners: nobody is greeted when a group is created.
--
-- Templates: {user}, {conversation}, {by}, {first} (first-join date, UTC).

local function render(template, vars)
  return (template:gsub("{(%w+)}", function(k) return vars[k] and tostring(vars[k]) or "{" .. k .. "}" end))
end

return {
  name = "welcome",
  config = {
    greeting = "Welcome, {user}!",
    returning = "Welcome back, {user}! You first joined on {first}.",
    goodbye = "Goodbye, {user}.",
    removed = "{user} was removed by {by}.",
    intro = "Hi! I am a bot. Say /help to see what I can do.",  -- when the bot is added; "" for none
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
        if first then
          vars.first = os.date("!%Y-%m-%d", first)
          if ctx.config.returning ~= "" then ctx.reply(render(ctx.config.returning, vars)) end
        else
          conv.set("first:" .. uid, ctx.now())
          if ctx.config.greeting ~= "" then ctx.reply(render(ctx.config.greeting, vars)) end
        end
      end
    end
  end,

  on_member_left = function(ev, ctx)
    for _, uid in ipairs(ev.members) do
      local vars = { user = uid, conversation = ev.cid, by = ev.by }
      local template = (ev.by and ev.by ~= uid) and ctx.config.removed or ctx.config.goodbye
      if template ~= "" then ctx.reply(render(template, vars)) end
    end
  end,

  on_invited = function(ev, ctx)
    if ctx.config.intro ~= "" then ctx.reply(ctx.config.intro) end
  end,
}
