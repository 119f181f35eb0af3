-- Scenarios for plugins/reminders.lua (ctx.schedule). The clock is set with `at` and moved with
-- `advance` ("10m", "1d"): jobs due on the way fire at their own times.

local function say(text, from, cid) return { message = { text = text, from = from or "Tom", cid = cid or "c1" } } end

return {
  plugins = { "reminders" },
  config = { tz = "Asia/Shanghai", conversations = { lobby = "lobby-cid" } },
  cases = {
    {
      name = "remind me in 10 minutes, in English",
      steps = {
        { at = "2026-11-30T08:00:00+08:00" }, -- a Monday
        { message = { text = "!remind me in 10m drink water" },
          expect = { replies = { "OK, reminder #1 at 2026-11-30 08:10 (Asia/Shanghai): drink water" } } },
        { advance = "9m", expect = { replies = {} } },
        { advance = "1m", expect = { replies = { { cid = "c1", text = "⏰ @Tom reminder: drink water" } } } },
        { advance = "1d", expect = { replies = {} } },
        { message = { text = "!remind list" }, expect = { replies = { "You have no reminders." } } },
      },
    },
    {
      name = "10分钟后 and 2 hours, in Chinese and in words",
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        { message = { text = "!remind me 10分钟后 喝水 🥤", from = "小明" },
          expect = { replies = { "好的，提醒 #1：2026-11-30 08:10（Asia/Shanghai）喝水 🥤" } } },
        { message = { text = "!remind me in 2 hours call @Jerry back", from = "Tom" },
          expect = { replies = { "OK, reminder #2 at 2026-11-30 10:00 (Asia/Shanghai): call @Jerry back" } } },
        { advance = "10m", expect = { replies = { "⏰ @小明 提醒：喝水 🥤" } } },
        { advance = "110m", expect = { replies = { "⏰ @Tom reminder: call @Jerry back" } } },
      },
    },
    {
      name = "at a time of day: today if it is still ahead, else tomorrow; tomorrow; a date",
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        { message = { text = "!remind me at 18:30 call mum" },
          expect = { replies = { "OK, reminder #1 at 2026-11-30 18:30 (Asia/Shanghai): call mum" } } },
        { message = { text = "!remind me at 7:05 run" },
          expect = { replies = { "OK, reminder #2 at 2026-12-01 07:05 (Asia/Shanghai): run" } } },
        { message = { text = "!remind me 明天 9:00 看牙医" },
          expect = { replies = { "好的，提醒 #3：2026-12-01 09:00（Asia/Shanghai）看牙医" } } },
        { message = { text = "!remind me at 2026-12-24 20:00 wrap the gifts" },
          expect = { replies = { "OK, reminder #4 at 2026-12-24 20:00 (Asia/Shanghai): wrap the gifts" } } },
        { message = { text = "!remind me at 2020-01-01 10:00 too late" },
          expect = { replies = { "2020-01-01 10:00 has already passed." } } },
        { advance = "10h30m", expect = { replies = { "⏰ @Tom reminder: call mum" } } },
        { advance = "12h35m", expect = { replies = { "⏰ @Tom reminder: run" } } },
        { at = "2026-12-01T09:00:00+08:00", expect = { replies = { "⏰ @Tom 提醒：看牙医" } } },
        { at = "2026-12-24T20:00:00+08:00", expect = { replies = { "⏰ @Tom reminder: wrap the gifts" } } },
      },
    },
    {
      name = "#lobby every monday 9:00 posts in the lobby each Monday, and a reload keeps it",
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        { message = { text = "!remind #lobby every monday 9:00 standup 🧍", from = "Alice" },
          expect = { replies = { "OK, reminder #1 every Mon 09:00 (Asia/Shanghai): standup 🧍" } } },
        { advance = "1h", expect = { replies = { { cid = "lobby-cid", text = "⏰ Reminder: standup 🧍" } } } },
        { reload = true },
        { advance = "6d23h59m", expect = { replies = {} } },
        { advance = "1m", expect = { replies = { { cid = "lobby-cid", text = "⏰ Reminder: standup 🧍" } } } },
        { message = { text = "!remind list", from = "Alice" },
          expect = { replies = { "Your reminders:\n#1 every Mon 09:00 → #lobby: standup 🧍 (next 2026-12-14 09:00)" } } },
      },
    },
    {
      name = "每天 and every weekday: a three-day advance runs a daily job three times",
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        { message = { text = "!remind here 每天 8:30 站会" },
          expect = { replies = { "好的，提醒 #1：每天 08:30（Asia/Shanghai）站会" } } },
        { message = { text = "!remind here every weekday 9:00 check the build" },
          expect = { replies = { "OK, reminder #2 every weekday 09:00 (Asia/Shanghai): check the build" } } },
        { advance = "3d", expect = { replies = {
          "⏰ 提醒：站会", "⏰ Reminder: check the build",
          "⏰ 提醒：站会", "⏰ Reminder: check the build",
          "⏰ 提醒：站会", "⏰ Reminder: check the build" } } },
        -- Thursday, Friday, then Saturday 2026-12-05 with the daily one only.
        { at = "2026-12-05T10:00:00+08:00", expect = { replies = {
          "⏰ 提醒：站会", "⏰ Reminder: check the build", "⏰ 提醒：站会", "⏰ Reminder: check the build",
          "⏰ 提醒：站会" } } },
        { message = { text = "!remind here every 2h stretch" },
          expect = { replies = { "OK, reminder #3 every 2h (Asia/Shanghai): stretch" } } },
        { advance = "4h", expect = { replies = { "⏰ Reminder: stretch", "⏰ Reminder: stretch" } } },
      },
    },
    {
      name = "list and cancel: only your own",
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        say("!remind me in 1h tea"),
        say("!remind here every day 12:00 lunch"),
        say("!remind me in 30m walk", "Jerry"),
        { message = { text = "!remind list" }, expect = { replies = { "Your reminders:\n" ..
          "#1 2026-11-30 09:00 → @Tom: tea (next 2026-11-30 09:00)\n" ..
          "#2 every day 12:00 → c1: lunch (next 2026-11-30 12:00)" } } },
        { message = { text = "!remind cancel 1", from = "Jerry" }, expect = { replies = { "You have no reminder #1." } } },
        { message = { text = "!remind 取消 1" }, expect = { replies = { "提醒 #1 已取消。" } } },
        { message = { text = "!remind cancel #2" }, expect = { replies = { "Reminder #2 cancelled." } } },
        { message = { text = "!remind list" }, expect = { replies = { "You have no reminders." } } },
        { message = { text = "!remind 列表", from = "Jerry" }, expect = { replies = { "你的提醒：\n" ..
          "#3 2026-11-30 08:30 → @Jerry：walk（下次 2026-11-30 08:30）" } } },
        { advance = "2h", expect = { replies = { "⏰ @Jerry reminder: walk" } } },
      },
    },
    {
      name = "a moderator cancels a member's reminder; the member is not reminded",
      config = { moderators = { "Mod" } },
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        { message = { text = "!remind here every 10m buy followers 💰", from = "Spammer" },
          expect = { replies = { "OK, reminder #1 every 10m (Asia/Shanghai): buy followers 💰" } } },
        { advance = "10m", expect = { replies = { "⏰ Reminder: buy followers 💰" } } },
        { message = { text = "!remind cancel 1", from = "Jerry" }, expect = { replies = { "You have no reminder #1." } } },
        { message = { text = "!remind cancel 1", from = "Mod" }, expect = { replies = { "Reminder #1 cancelled." } } },
        { advance = "1h", expect = { replies = {} } },
      },
    },
    {
      name = "bad input gets a clear answer",
      config = { max_per_member = 2 },
      steps = {
        { at = "2026-11-30T08:00:00+08:00" },
        { message = { text = "!remind" }, expect = { replies = { { match = "^usage: !remind me|here" } } } },
        { message = { text = "!remind me in 10m" }, expect = { replies = { "What should I remind you of? Put the text after the time." } } },
        { message = { text = "!remind me whenever tea" }, expect = { replies = { { match = "^I did not understand when" } } } },
        { message = { text = "!remind #kitchen in 10m tea" }, expect = { replies = { "Unknown conversation 'kitchen'." } } },
        { message = { text = "!remind me every 1m tea" }, expect = { replies = { "Repeating reminders can be at most every 5 minutes." } } },
        { message = { text = "!remind me at 25:00 tea" }, expect = { replies = { { match = "^I did not understand when" } } } },
        { message = { text = "!remind me in 1h " .. string.rep("x", 501) },
          expect = { replies = { "That reminder is too long (501 bytes; at most 500)." } } },
        say("!remind me in 1h one"),
        say("!remind me in 2h two"),
        { message = { text = "!remind me in 3h three" },
          expect = { replies = { "You have 2 reminders already (the most is 2); cancel one first (!remind cancel <id>)." } } },
      },
    },
  },
}
