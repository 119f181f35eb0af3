-- Language: each member chooses the language the bot's plugins speak to them (`ctx.t`), and moderators
-- (or the conversation's managers) choose a conversation's. The choices are the host's (`ctx.locale`,
-- kept in the bot's state), so every plugin with locale files follows them; a client may also put
-- `attrs.lang` on its messages, and a conversation attribute `locale` (or `lang`) sets the conversation's.
--   !lang                 your language and where it comes from
--   !lang zh-CN           speak Chinese to me       !lang reset   back to the conversation's / the bot's
--   !lang here zh-CN      this conversation's language (moderators, managers)   !lang here reset
return {
  name = "lang",
  config = {
    -- offered in the answer to `!lang` (any valid tag is accepted)
    languages = { "en", "zh-CN" },
    -- client ids who may set a conversation's language, besides role moderator and its managers
    moderators = {},
  },

  on_load = function(ctx)
    for _, uid in ipairs(ctx.config.moderators) do ctx.roles.grant(uid, "moderator") end
    ctx.commands.add{
      name = "lang", args = "[tag] [value]",
      description = "choose your language: !lang zh-CN, !lang en, !lang reset; !lang here <tag> for the conversation",
      run = function(args, msg, ctx)
        local tag, value = args.tag, args.value
        local function name_of(t)
          local name = ctx.t("name." .. t, nil, { locale = t })
          if name == "name." .. t then return t end
          return name
        end
        if tag == nil then
          local current, from = ctx.locale.current()
          return ctx.reply(ctx.t("current." .. from, {
            tag = current, name = name_of(current), languages = table.concat(ctx.config.languages, ", "),
            prefix = ctx.commands.prefix }))
        end
        if tag == "here" then
          local member = ctx.conv(msg.cid).member(msg.from)
          local allowed = ctx.roles.has(msg.from, "moderator")
            or (member ~= nil and (member.role == "owner" or member.role == "manager"))
          if not allowed then return ctx.reply(ctx.t("here.denied")) end
          if value == nil or value == "reset" or value == "auto" then
            ctx.locale.set_conv(msg.cid, nil)
            return ctx.reply(ctx.t("here.reset", { tag = ctx.locale.default() }))
          end
          local set, err = ctx.locale.set_conv(msg.cid, value)
          if not set then return ctx.reply(ctx.t("invalid", { tag = value })) end
          return ctx.reply(ctx.t("here.set", { tag = set, name = name_of(set) }, { locale = set }))
        end
        if value ~= nil then return ctx.reply(ctx.t("usage", { prefix = ctx.commands.prefix })) end
        if tag == "reset" or tag == "auto" then
          ctx.locale.set_user(msg.from, nil)
          local current = ctx.locale.current()
          return ctx.reply(ctx.t("reset", { tag = current, name = name_of(current) }))
        end
        local set = ctx.locale.set_user(msg.from, tag)
        if not set then return ctx.reply(ctx.t("invalid", { tag = tag })) end
        return ctx.reply(ctx.t("set", { tag = set, name = name_of(set) }))
      end,
    }
  end,

  -- a conversation attribute `locale` (or `lang`) sets the conversation's language; an empty one clears it
  on_conversation_updated = function(ev, ctx)
    local attrs = ev.attrs or {}
    local tag = attrs.locale
    if tag == nil then tag = attrs.lang end
    if type(tag) ~= "string" then return end
    if tag == "" then return ctx.locale.set_conv(ev.cid, nil) end
    local set = ctx.locale.set_conv(ev.cid, tag)
    if not set then ctx.log("warning", "conversation " .. ev.cid .. ": attribute locale '" .. tag .. "' is not a locale tag") end
  end,
}
