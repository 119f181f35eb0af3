-- Scenarios for plugins/gatekeeper.lua: join screening, join waves, raid mode, founders.
-- The runner's clock starts at 1700000000; Tom, Jerry and alice (a moderator) are established members.

local QUESTION = { { q = "What is 2 + 2?", a = { "4", "four" } } }
-- The in-group fallback (no 1:1 chat opened by the bot): the question is posted in the group.
local SCREEN = { screening = true, kinds = {}, questions = QUESTION, ask_in_group = true, dm = false }
-- The default: the bot asks in a 1:1 chat it opens (ctx.dm; the runner's is "dm:<user>").
local SCREEN_DM = { screening = true, kinds = {}, questions = QUESTION }
local DM_ASK = "To post in c1, answer: What is 2 + 2?"
local ASK = "@Tom welcome! Before you can post here, answer this in a 1:1 chat with modbot (or !answer <answer>) within 5 min: What is 2 + 2?"

-- n self-joins of raider1..raidern, half a second apart, starting at `first`.
local function raiders(first, last, expect_last)
  local steps = {}
  for i = first, last do
    local uid = "raider" .. i
    steps[#steps + 1] = { join = { members = { uid }, by = uid } }
    if i < last then steps[#steps + 1] = { advance = 0.5 } end
  end
  if expect_last then steps[#steps].expect = expect_last end
  return steps
end

local function concat(...)
  local out = {}
  for _, list in ipairs({ ... }) do for _, s in ipairs(list) do out[#out + 1] = s end end
  return out
end

local WAVE_ALERT = "Join wave: 10 members joined within 10 s. c1 is invite-only for 15 min, and new members are muted for 60 min. Moderators: !gate unlock, !gate raid off."

local function wave_actions()
  local a = { { kind = "lock", cid = "c1" } }
  for i = 1, 10 do a[#a + 1] = { kind = "mute", user = "raider" .. i, seconds = 3600 } end
  return a
end

return {
  plugins = { "gatekeeper" },
  config = { moderators = { "alice" } },
  cases = {
    -- Screening
    {
      name = "the bot asks a new member in a 1:1 chat it opens; the right answer there lifts the mute",
      config = SCREEN_DM,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "dm:Tom", text = DM_ASK } },
                     actions = { { kind = "mute", cid = "c1", user = "Tom", seconds = 300 } } } },
        { message = "hello everyone", expect = { verdict = "muted" } },
        -- Chatting elsewhere is not an answer; the 1:1 chat is.
        { message = { cid = "c2", text = "4" }, expect = { replies = {} } },
        { message = { cid = "dm:Tom", text = "5" },
          expect = { replies = { { cid = "dm:Tom", text = "Not quite, 2 more tries. What is 2 + 2?" } } } },
        { message = { cid = "dm:Tom", text = "４！" },
          expect = { replies = { { cid = "dm:Tom", text = "Thanks, Tom! You can post in c1 now." } },
                     actions = { { kind = "mute", cid = "c1", user = "Tom", seconds = 0 } } } },
        { message = "hello everyone 👋", expect = { verdict = "allow" } },
      },
    },
    {
      name = "在私聊里用中文回答新成员问题",
      config = { screening = true, kinds = {}, language = "zh",
                 questions = { { q = "What colour is the sky?", a = { "blue" }, q_zh = "天空是什么颜色？", a_zh = { "蓝色" } } } },
      steps = {
        { join = { members = { "小明" }, by = "小明" },
          expect = { replies = { { cid = "dm:小明", text = "要在 c1 发言，请回答：天空是什么颜色？" } },
                     actions = { { kind = "mute", user = "小明", seconds = 300 } } } },
        { message = { from = "小明", text = "大家好" }, expect = { verdict = "muted" } },
        { message = { cid = "dm:小明", from = "小明", text = "绿色" },
          expect = { replies = { { cid = "dm:小明", text = "不对，还可以再试 2 次。天空是什么颜色？" } } } },
        { message = { cid = "dm:小明", from = "小明", text = "蓝色。" },
          expect = { replies = { { cid = "dm:小明", text = "谢谢，小明！现在可以在 c1 发言了。" } },
                     actions = { { kind = "mute", cid = "c1", user = "小明", seconds = 0 } } } },
        { message = { from = "小明", text = "大家好 😊" }, expect = { verdict = "allow" } },
      },
    },
    {
      name = "a question in a second conversation goes to the same 1:1 chat",
      config = SCREEN_DM,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" }, expect = { replies = { { cid = "dm:Tom", text = DM_ASK } } } },
        { join = { cid = "c2", members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "dm:Tom", text = "To post in c2, answer: What is 2 + 2?" } } } },
        { message = { cid = "dm:Tom", text = "4" },
          expect = { replies = { { cid = "dm:Tom", text = "Thanks, Tom! You can post in c1 now." } } } },
      },
    },
    {
      name = "a new member is muted and asked; the right answer in a 1:1 with the bot lifts the mute",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "c1", text = ASK } },
                     actions = { { kind = "mute", user = "Tom", seconds = 300,
                                   reason = "new member: answer modbot's question in a 1:1 chat with modbot: What is 2 + 2?" } } } },
        { message = "hello everyone", expect = { verdict = "muted" } },
        { message = { text = "hi Tom", from = "Jerry" }, expect = { verdict = "allow" } },
        -- Tom opens a 1:1 chat with the bot: the question is asked there.
        { invited = { cid = "dm", by = "Tom" },
          expect = { replies = { { cid = "dm", text = "To post in c1, answer: What is 2 + 2?" } } } },
        { message = { cid = "dm", text = " Four! " },
          expect = { replies = { { cid = "dm", text = "Thanks, Tom! You can post in c1 now." } },
                     actions = { { kind = "mute", cid = "c1", user = "Tom", seconds = 0 } } } },
        { message = "hello everyone", expect = { verdict = "allow" } },
        { expect_state = { ["conv:c1:passed:Tom"] = true, ["conv:c1:pending:Tom"] = NIL, ["user:Tom:pending"] = NIL } },
        -- Passed once: leaving and coming back asks nothing.
        { leave = { members = { "Tom" } } },
        { join = { members = { "Tom" }, by = "Tom" }, expect = { replies = {}, actions = {} } },
      },
    },
    {
      name = "wrong answers use up the tries, then the member is removed",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" } },
        { invited = { cid = "dm", by = "Tom" } },
        { message = { cid = "dm", text = "5" }, expect = { replies = { { cid = "dm", text = "Not quite, 2 more tries. What is 2 + 2?" } } } },
        { message = { cid = "dm", text = "22" }, expect = { replies = { { cid = "dm", text = "Not quite, 1 more tries. What is 2 + 2?" } } } },
        { message = { cid = "dm", text = "fish" },
          expect = { replies = {},
                     actions = { { kind = "kick", cid = "c1", user = "Tom", reason = "too many wrong answers to the new-member question" } } } },
        { expect_state = { ["conv:c1:pending:Tom"] = NIL, ["user:Tom:pending"] = NIL, ["conv:c1:passed:Tom"] = NIL } },
        -- Coming back means a new question.
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "c1", text = ASK }, { cid = "dm", text = "To post in c1, answer: What is 2 + 2?" } } } },
      },
    },
    {
      name = "no answer within the time limit removes the member, also after a reload",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" } },
        { advance = 200 },
        { reload = true },
        { advance = 98, expect = { actions = {} } },
        { advance = 4,
          expect = { actions = { { kind = "kick", cid = "c1", user = "Tom", reason = "did not answer the new-member question in time" } } } },
        { advance = 60, expect = { actions = {} } },
      },
    },
    {
      name = "!answer works in any conversation with the bot; a member with nothing to answer is told so",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" } },
        { message = { cid = "c2", text = "!answer 4" },
          expect = { replies = { { cid = "c2", text = "Thanks, Tom! You can post in c1 now." } } } },
        { message = { cid = "c2", text = "!answer 4" }, expect = { replies = { "you have no question waiting" } } },
        -- Plain text in another group is not taken as an answer.
        { join = { cid = "c3", members = { "Tom" }, by = "Tom" } },
        { message = { cid = "c2", text = "4" }, expect = { replies = {} } },
      },
    },
    {
      name = "arithmetic questions: text that is no number is asked again without using a try",
      config = { screening = { "c1" }, kinds = { "math" }, ask_in_group = true, dm = false },
      steps = {
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "c1", match = "^@Tom welcome! .*: What is %d %+? ?%-? ?%d%?$" } } } },
        { invited = { cid = "dm", by = "Tom" } },
        { message = { cid = "dm", text = "hello?" },
          expect = { replies = { { cid = "dm", match = "^To post in c1, answer: What is %d [%+%-] %d%?$" } } } },
        { message = { cid = "dm", text = "-100" },
          expect = { replies = { { cid = "dm", match = "^Not quite, 2 more tries%. What is %d [%+%-] %d%?$" } } } },
        -- Screening is only on in c1.
        { join = { cid = "c2", members = { "Jerry" }, by = "Jerry" }, expect = { replies = {}, actions = {} } },
      },
    },
    {
      name = "pick-the-emoji questions, in Chinese",
      config = { screening = true, kinds = { "emoji" }, language = "zh", ask_in_group = true, dm = false },
      steps = {
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "c1", match = "^@Tom 欢迎！.*哪一个是.+？1 .+  2 .+  3 .+  4 .+（回答 1%-4 或表情）$" } },
                     actions = { { kind = "mute", user = "Tom", seconds = 300 } } } },
      },
    },
    {
      name = "English and Chinese together, with your own question in both",
      config = { screening = true, kinds = {}, language = "both", ask_in_group = true, dm = false,
                 questions = { { q = "What colour is the sky?", a = { "blue" }, q_zh = "天空是什么颜色？", a_zh = { "蓝色" } } } },
      steps = {
        { join = { members = { "Tom" }, by = "Tom" } },
        { invited = { cid = "dm", by = "Tom" } },
        { message = { cid = "dm", text = "蓝色" },
          expect = { replies = { { cid = "dm", text = "Thanks, Tom! You can post in c1 now.\n谢谢，Tom！现在可以在 c1 发言了。" } } } },
      },
    },
    {
      name = "members added by a moderator or the bot are not screened; moderators never are",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom", "Jerry" }, by = "alice" }, expect = { replies = {}, actions = {} } },
        { join = { members = { "alice" }, by = "alice" }, expect = { replies = {}, actions = {} } },
        { join = { members = { "Spike" }, by = "modbot" }, expect = { replies = {}, actions = {} } },
        { join = { members = { "Tyke" }, by = "Jerry" }, expect = { actions = { { kind = "mute", user = "Tyke" } } } },
      },
    },
    {
      name = "a member who leaves with a question waiting is not kicked later",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" } },
        { leave = { members = { "Tom" } } },
        { advance = 400, expect = { actions = {} } },
        { expect_state = { ["user:Tom:pending"] = NIL } },
      },
    },
    {
      name = "moderators let a waiting member in with !gate pass",
      config = SCREEN,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" } },
        { message = { text = "!gate pass @Tom", from = "alice" },
          expect = { replies = { "Tom may post in c1 now" }, actions = { { kind = "mute", user = "Tom", seconds = 0 } } } },
        { message = "thanks", expect = { verdict = "allow" } },
      },
    },

    -- Founders
    {
      name = "founders are not new members nor a join wave",
      config = { screening = true },
      steps = {
        { join = { members = { "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "a11", "a12" }, by = "a1", founding = true },
          expect = { replies = {}, actions = {} } },
        { message = { text = "hi all", from = "a5" }, expect = { verdict = "allow" } },
        { expect_state = { ["conv:c1:joins"] = NIL } },
      },
    },

    -- Join waves
    {
      name = "ten joins within ten seconds lock the conversation and mute the wave",
      steps = concat(
        raiders(1, 9, { replies = {}, actions = {} }),
        {
          { join = { members = { "raider10" }, by = "raider10" },
            expect = { replies = { { cid = "c1", text = WAVE_ALERT } }, actions = wave_actions() } },
          { message = { text = "FREE NITRO https://scam.example @everyone", from = "raider10" }, expect = { verdict = "muted" } },
          { message = { text = "what is going on?", from = "Jerry" }, expect = { verdict = "allow" } },
          -- Raid mode: members added while locked are muted too.
          { join = { members = { "raider11" }, by = "raider2" },
            expect = { actions = { { kind = "mute", user = "raider11", seconds = 3600, reason = "raid mode: new members cannot post for a while" } } } },
          { message = { text = "!gate status", from = "alice" },
            expect = { replies = { { match = "^gate in c1: locked %(invite%-only, unlocks in 15 min%); raid mode on %(30 min left, joiners muted 60 min%); screening off; joins in the last 10 s: 10/10$" } } } },
          { message = { text = "!gate unlock", from = "alice" },
            expect = { replies = { "c1 is open to new members again" }, actions = { { kind = "unlock", cid = "c1" } } } },
          { message = { text = "!gate raid off", from = "alice" }, expect = { replies = { "raid mode off in c1" } } },
          { advance = 11 },
          { join = { members = { "late" }, by = "late" }, expect = { actions = {} } },
          { message = { text = "hello", from = "late" }, expect = { verdict = "allow" } },
        }),
    },
    {
      name = "from the third join of a surge, the surge's joiners are held until it passes",
      steps = concat(
        raiders(1, 2),
        {
          { message = { text = "hi", from = "raider1" }, expect = { verdict = "allow" } },
          { advance = 0.5 },
          { join = { members = { "raider3" }, by = "raider3" }, expect = { actions = {}, replies = {} } },
          { message = { text = "https://scam.example", from = "raider1" },
            expect = { verdict = "block", code = 4340, reason = "many members are joining right now; new members can post in a few seconds" } },
          { message = { text = "hi", from = "Jerry" }, expect = { verdict = "allow" } },
          { advance = 10 },
          { message = { text = "sorry, hi again", from = "raider1" }, expect = { verdict = "allow" } },
        }),
    },
    {
      name = "the lock ends after its cool-down; raid mode after its time",
      steps = concat(raiders(1, 10), {
        { advance = 15 * 60 - 10, expect = { actions = {} } },
        { advance = 10, expect = { actions = { { kind = "unlock", cid = "c1" } }, replies = { "c1 is open to new members again." } } },
        { join = { members = { "x" }, by = "x" }, expect = { actions = { { kind = "mute", user = "x", seconds = 3600 } } } },
        { advance = 15 * 60 },
        { join = { members = { "y" }, by = "y" }, expect = { actions = {} } },
        { message = { text = "!gate status", from = "alice" },
          expect = { replies = { { match = "^gate in c1: open; raid mode off; screening off; joins in the last 10 s: 1/10$" } } } },
      }),
    },
    {
      name = "members added by others are not a wave (locking would not stop them)",
      steps = {
        { join = { members = { "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11", "n12" }, by = "Jerry" },
          expect = { actions = {}, replies = {} } },
        { message = { text = "hi", from = "n3" }, expect = { verdict = "allow" } },
      },
    },
    {
      name = "counting added members too, with a smaller wave and no cool-down",
      config = { wave = { joins = 4, invited = true }, lock_minutes = 0 },
      steps = {
        { join = { members = { "n1", "n2", "n3", "n4" }, by = "Jerry" },
          expect = { actions = { { kind = "lock" }, { kind = "mute", user = "n1" }, { kind = "mute", user = "n2" },
                                 { kind = "mute", user = "n3" }, { kind = "mute", user = "n4" } },
                     replies = { { match = "^Join wave: 4 members joined within 10 s%. c1 is invite%-only, and" } } } },
        { advance = 3600, expect = { actions = {} } },
        { message = { text = "!gate status", from = "alice" }, expect = { replies = { { match = "^gate in c1: locked %(invite%-only%); raid mode off" } } } },
      },
    },

    -- Raid mode by command
    {
      name = "!gate raid on mutes every joiner until !gate raid off; only moderators and managers may use it",
      steps = {
        { message = { text = "!gate raid on 5", from = "Tom" }, expect = { replies = { { match = "^!gate is only for" } } } },
        { message = { text = "!gate raid on 5", from = "alice" },
          expect = { replies = { "raid mode on in c1 for 5 min: new members are muted for 60 min" } } },
        { join = { members = { "x" }, by = "x" }, expect = { actions = { { kind = "mute", user = "x", seconds = 3600 } } } },
        { message = { text = "spam", from = "x" }, expect = { verdict = "muted" } },
        { message = { text = "!gate raid off", from = "alice" } },
        { join = { members = { "y" }, by = "y" }, expect = { actions = {} } },
        { message = { text = "!gate raid on", from = "alice" }, expect = { replies = { { match = "for 30 min" } } } },
        { advance = 30 * 60 + 2 },
        { join = { members = { "z" }, by = "z" }, expect = { actions = {} } },
      },
    },
    {
      name = "raid mode that kicks",
      config = { raid_action = "kick" },
      steps = {
        { message = { text = "!gate raid on", from = "alice" }, expect = { replies = { { match = "new members are removed$" } } } },
        { join = { members = { "x" }, by = "x" },
          expect = { actions = { { kind = "kick", user = "x", reason = "raid mode: new members cannot post for a while" } } } },
      },
    },
    {
      name = "a wave replaces the questions waiting with raid mode's mute; every action is in the mod-log",
      config = { screening = true, kinds = {}, questions = QUESTION, modlog = "mods", wave = { joins = 2 } },
      steps = {
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "mods", match = "^mute Tom in c1 %(rule screening: new member, question asked %(300 s to answer%)%) by gatekeeper — undo: !gate pass Tom$" },
                                 { cid = "dm:Tom", text = DM_ASK } } } },
        { join = { members = { "x" }, by = "x" },
          expect = { replies = {
                       { cid = "mods", text = "lock in c1 (rule join_wave: join wave: 2 joins in 10 s) by gatekeeper — undo: !gate unlock" },
                       { cid = "mods", text = "raid_on in c1 (rule raid: 30 min) by gatekeeper — undo: !gate raid off" },
                       { cid = "mods", text = "mute Tom in c1 (rule raid: joined in a join wave, 3600 s) by gatekeeper — undo: !gate pass Tom" },
                       { cid = "mods", text = "mute x in c1 (rule raid: joined in a join wave, 3600 s) by gatekeeper — undo: !gate pass x" },
                       { cid = "c1", match = "^Join wave: 2 members joined within 10 s%." } },
                     actions = { { kind = "lock", reason = "join wave: 2 joins in 10 s" },
                                 { kind = "mute", user = "Tom", seconds = 3600 }, { kind = "mute", user = "x", seconds = 3600 } } } },
        { expect_state = { ["conv:c1:pending:Tom"] = NIL, ["user:Tom:pending"] = NIL } },
        { message = { text = "!gate raid off", from = "alice" },
          expect = { replies = { { cid = "mods", text = "raid_off in c1 (rule raid) by alice" }, "raid mode off in c1" } } },
      },
    },
  },
}
