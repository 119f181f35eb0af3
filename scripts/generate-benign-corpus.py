#!/usr/bin/env python3
"""Writes plugins/tests/corpus/benign.txt: ordinary chat messages, one per line, for measuring how often the
moderation presets block talk they should not (issue 28: under 0.5 %).

The messages are composed from templates and word lists with a fixed seed, so the file is the same on every
run: English and Chinese small talk, plans, work and study, games, code snippets, links to common sites,
@mentions, emoji and numbers, and on purpose many words that contain profanity-like letters (assassin,
Scunthorpe, cocktail, Dickens, Sussex, shiitake, 发生, 操作, 一次性交付, 刷单词...). Nothing in it should be
blocked; a message that is belongs to the false-positive count.

    python3 scripts/generate-benign-corpus.py [--count 6000] [--seed 28] [--out plugins/tests/corpus/benign.txt]
"""

import argparse
import os
import random

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar",
         "peggy", "trent", "victor", "walter", "Tom", "Jerry", "xiaoming", "lihua", "zhang_wei", "mei", "kenji",
         "sofia", "lucas", "amir", "priya", "noah", "emma", "liam"]
PLACES = ["the cafe", "the library", "the office", "the station", "Scunthorpe", "Sussex", "Essex", "Middlesex",
          "Penistone", "Cumberland", "Lightwater", "Shitterton", "Clitheroe", "Arsenal's stadium", "the park",
          "the gym", "Babes in the Wood pub", "the cocktail bar", "downtown", "the airport", "Dickens Road",
          "the bass pond", "Hancock Street", "Cockburnspath", "Kent", "Brighton", "Boston", "Shanghai", "Hangzhou"]
FOODS = ["shiitake risotto", "cocktail sausages", "cucumber salad", "ramen", "dumplings", "pizza", "scampi",
         "spotted dick", "a cocktail", "bass fillet", "peacock-blue macarons", "hot pot", "coq au vin", "tacos",
         "sushi", "bubble tea", "pho", "a bagel", "assam tea", "cassava chips", "passion fruit juice",
         "butternut squash soup", "titbits", "kebab", "fish and chips"]
TOPICS = ["the assessment", "the class assignment", "the analysis report", "the analytics dashboard",
          "the assassin's creed stream", "the document", "the specialist appointment", "the therapist visit",
          "the passage we read", "the classic novel", "the cockpit simulator", "the Hitchcock film",
          "the bassist audition", "the grassroots campaign", "the homework", "the title screen", "the titanium case",
          "the button layout", "the buttress design", "the circumstances", "the accumulator", "the Dickens essay",
          "the shuttlecock order", "the scraper", "the cumulative totals", "the raccoon video", "the snigger emoji",
          "the niggardly budget", "the Scunthorpe match", "the sextant lesson", "the Essex trip", "the pass mark",
          "the harassment training", "the embassy visa", "the basement flood", "the Matsushita catalog"]
GAMES = ["Minecraft", "Elden Ring", "Zelda", "Stardew Valley", "League", "Valorant", "Factorio", "Hades",
         "Assassin's Creed", "Overwatch", "chess", "Go", "Tetris", "Celeste", "Rocket League"]
SITES = ["https://github.com/apple/swift", "https://github.com/lua/lua/issues/12", "github.com/hookbot/hookbot/pull/88",
         "https://en.wikipedia.org/wiki/Scunthorpe_problem", "https://en.wikipedia.org/wiki/Lua_(programming_language)",
         "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "https://youtu.be/jNQXAC9IVRw", "https://www.bilibili.com/video/BV1xx411c7mD",
         "https://www.zhihu.com/question/19550225", "https://docs.python.org/3/library/re.html",
         "https://developer.apple.com/documentation/swift", "https://docs.rs/regex/latest/regex/",
         "https://stackoverflow.com/questions/11227809", "https://news.ycombinator.com/item?id=1",
         "https://www.bbc.co.uk/news", "https://maps.google.com/?q=cafe", "docs.swift.org/swift-book",
         "https://www.rust-lang.org/learn", "https://pcre2project.github.io/pcre2/doc/", "https://www.lua.org/manual/5.4/",
         "www.example.com/schedule", "https://weather.com/today", "https://zh.wikipedia.org/wiki/上海",
         "https://www.reddit.com/r/programming", "https://arxiv.org/abs/1706.03762"]
EMOJI = ["😀", "😂", "👍", "🎉", "🙏", "❤️", "🔥", "😅", "🤔", "👀", "🍕", "☕", "🚀", "✅", "😭", "🙌", "👋🏽", "🥳", "💯",
         "🐱", "🌧️", "☀️", "📚", "🎮", ":)", ":D", "xD", "^_^", "lol", "haha"]
TIMES = ["at 5", "at 7:30", "tomorrow", "tonight", "on Friday", "next week", "in 10 minutes", "after lunch",
         "around 3pm", "this weekend", "on the 14th", "before 9", "at noon"]
CODE = ["`for i in range(10): print(i)`", "`let x = try await client.send(msg)`", "`git rebase -i HEAD~3`",
        "`SELECT count(*) FROM messages WHERE cid = ?`", "`npm install --save-dev eslint`",
        "`local ok, err = pcall(f)`", "`make test`", "`docker compose up -d`", "`kill -9 1234`",
        "`grep -rn \"TODO\" Sources/`", "`assert(x ~= nil, \"x is nil\")`", "`s.match(/\\d+/g)`",
        "`ssh-keygen -t ed25519`", "`x = x if x else \"default\"`", "`fn main() { println!(\"hi\"); }`",
        "`#include <stdio.h>`", "`chmod +x run.sh`", "`curl -s https://api.github.com/repos/lua/lua`",
        "`pass = os.environ[\"PASS\"]`", "`class Assessment: pass`", "`xxx_test.go`", "`const sum = a + b;`"]
NUMBERS = ["42", "3.14", "100%", "1,000", "2024", "19:45", "$25", "€10", "¥88", "#3", "v2.1.0", "4K", "5G", "h264",
           "Win10", "mp3", "2fa", "404", "500 errors", "1080p", "24/7", "3/4", "0.5 %", "A55", "B52", "x86_64"]

EN = [
    "hey {n}, are we still on for {t}?",
    "morning all {e}",
    "good night everyone {e}",
    "@{n} can you review my PR? {s}",
    "@{n} @{n2} meeting moved to {t}",
    "I'll be at {p} {t}",
    "anyone been to {p}? looking for a good place to eat",
    "just had {f} and it was amazing {e}",
    "we're getting {f} for lunch, want some?",
    "did you finish {c}?",
    "I'm still working on {c}, should be done {t}",
    "thanks {n}! {e}",
    "lol that's hilarious {e}",
    "has anyone seen {c}? link: {s}",
    "here's the doc: {s}",
    "check this out {s} {e}",
    "wiki says: {s}",
    "the build is failing on {c}, error 500 again",
    "try running {code} and see what happens",
    "I think the bug is in this line: {code}",
    "can someone explain why {code} hangs?",
    "playing {g} {t}, who's in?",
    "just beat the boss in {g} {e}",
    "{g} patch notes are out {s}",
    "it's raining again in {p} {e}",
    "weather is nice today, going to {p}",
    "happy birthday {n}!!! {e}{e}",
    "congrats on the new job {n} {e}",
    "I got {num} on the quiz, not bad",
    "the train to {p} is delayed by {num} minutes",
    "ordered {f}, arrives {t}",
    "does anyone know a good specialist near {p}?",
    "my therapist says I should sleep more {e}",
    "reading a classic Dickens novel, the passage about the fog is great",
    "the assassin in {g} is overpowered",
    "Scunthorpe United won {num}-1 last night!",
    "we drove through Middlesex and Sussex on the way",
    "the cocktail menu at {p} is great",
    "grab me a shiitake bun if they have one",
    "the analysis is in the shared folder {s}",
    "can you pass the salt? {e}",
    "our bassist can't make it {t}",
    "the grass is so green after the rain",
    "Hitchcock's films are so good, watching Psycho {t}",
    "cockpit tour at the museum was cool {e}",
    "I need to retake the assessment {t}",
    "let's use Matsushita's old catalog as a reference",
    "the raccoon got into the trash again lol",
    "that was such a niggardly tip, poor waiter",
    "he gave a little snigger when he saw it",
    "I'm analysing the analytics numbers now",
    "buy some cucumber and cassava on the way home?",
    "hey {n}, what's the wifi password?",
    "ok",
    "sounds good",
    "lmk",
    "brb",
    "on my way {e}",
    "yes please",
    "no worries",
    "see you {t}",
    "who's bringing snacks?",
    "what time is it there?",
    "I'll call you later",
    "the {num} bus is late again",
    "price dropped to {num}, worth it?",
    "my phone is a Galaxy {num}, battery still fine",
    "upgraded to {num}, so much faster",
    "the file is 1080p {num}, sending it now",
    "version {num} broke my config {e}",
    "is {c} due {t}?",
    "sorry I missed the call, was at {p}",
    "does {code} work on windows?",
    "PSA: the office is closed {t}",
    "reminder: standup {t} {e}",
    "FYI the docs moved to {s}",
    "I passed the exam!!! {e}",
    "I'm so tired lol, the class assignment took forever",
    "what's the title of that song?",
    "the button is too small on mobile",
    "is it spotted dick or sticky toffee pudding for dessert?",
    "tits and robins at the bird feeder this morning {e}",
    "the essex accent in that show is so strong",
    "Cockburnspath is a real village, look it up {s}",
    "I live near Penistone, it's lovely",
    "that's a classic mistake, happens to everyone",
    "the harassment training is mandatory, due {t}",
    "went to the embassy for the visa, took forever",
    "our basement flooded, ugh {e}",
    "the assassin bug scared the cat",
    "we should document this before we forget",
    "this is such a hot take lol",
    "that boss fight was brutal, died {num} times",
    "anyone want to join a game of {g}?",
    "I love {f} so much",
    "what are you cooking tonight?",
    "send me the slides when you can",
    "the meeting notes are here: {s}",
    "shut up, that's amazing {e}",
    "damn, that's a nice view",
    "what the heck happened to the server?",
    "oh crap I forgot my keys",
    "this song slaps {e}",
    "I'm dead 😂😂",
    "killing it today {n}!",
    "the kill switch stopped the job, all good",
    "is this a scam? someone DMed me about a prize",
    "don't click random links claiming free stuff, report them to the mods",
    "crypto is down again, glad I didn't buy",
    "got a gift card for my birthday {e}",
    "bitcoin hit {num} today apparently",
    "the raid in {g} starts {t}, bring potions",
    "we need a tank for the dungeon",
    "spicy ramen challenge {t}? {e}",
    "my cat knocked my coffee over again",
    "the cock crowed at 5am, couldn't sleep",
    "the Hancock building is so tall",
    "we watched a documentary on sextant navigation",
    "the breast stroke is my favourite swimming style",
    "sex education class was awkward lol",
    "the dog's name is Dick, after Philip K. Dick",
    "Moby Dick is a long book",
    "I'm pissed my flight got cancelled",
    "bloody hell, the queue is long",
    "WHAT A GAME {e}",
    "NO WAY",
    "omg omg omg {e}",
    "the analytics team is hiring: {s}",
    "found this on zhihu: {s}",
    "bilibili video about it: {s}",
    "mods, can we pin {s}?",
    "the pass is valid until {t}",
    "Dickens wrote Bleak House",
    "I'm allergic to shellfish, no scampi for me",
    "a peacock walked through the park today",
    "let's hang out at {p} {t}",
    "the Lightwater country park is lovely in autumn",
    "Clitheroe castle is worth a visit",
    "Shitterton is a real place in Dorset lol",
    "this butterscotch is amazing",
    "the title fight is on {t}",
    "I accidentally deleted the folder, restoring from backup",
    "I accidentally reported the wrong bug, fixed now",
    "turn on 2fa please, it's in settings",
    "we'll split the bill, {num} each",
    "{n}: the link is {s}",
]

ZH = [
    "{zn}，你今天几点下班？",
    "明天{zt}开会，别迟到 {e}",
    "刚才发生了什么？群里好多消息",
    "这个操作系统太卡了",
    "操作步骤在文档里：{s}",
    "我妈妈的生日是下周",
    "他妈妈做的饭很好吃",
    "你吃饭了吗？",
    "周末去{zp}玩吗？",
    "今天天气真好 {e}",
    "下雨了，记得带伞",
    "这个bug我修好了，提交在这：{s}",
    "{code} 这一行报错了",
    "有人玩{g}吗？{zt}开黑",
    "哈哈哈哈笑死我了 {e}",
    "谢谢大家 {e}",
    "@{n} 你看一下这个PR",
    "我在B站看到一个视频：{s}",
    "知乎上有个回答讲得很清楚：{s}",
    "我们采用一次性交付，不分期",
    "方案支持弹性交付，客户可以按需选",
    "个性交友软件现在很多",
    "出口交易额今年增长了{num}",
    "前面路口交通堵塞，绕路吧",
    "这种感觉就叫做爱情吧",
    "周末一起去做爱心公益吗？",
    "每天早上刷单词，坚持一个月了",
    "共享单车刷单车卡就能骑",
    "考试考了{num}分，还行",
    "我们加个微信吧，方便联系",
    "群公告：{zt}停电，注意保存文件",
    "老板说今天日结工资的兼职不要去，小心被骗",
    "刷单都是骗局，大家别信",
    "这家店的火锅太好吃了",
    "操场上好多人在跑步",
    "别操心了，交给我",
    "日本的樱花开了 {e}",
    "我写日记写了三年",
    "这个函数的性能不太好",
    "我们的服务支持上门维修",
    "黄金价格又涨了",
    "支援交通疏导的志愿者辛苦了",
    "他是个老司机，开车很稳",
    "明天见 {e}",
    "收到",
    "好的",
    "没问题",
    "辛苦了 {e}",
    "晚安 {e}",
    "早上好",
    "我到{zp}了",
    "稍等，马上到",
    "这个价格是{num}元，贵了点",
    "新版本{num}发布了，更新日志：{s}",
    "数据库迁移脚本跑完了",
    "这篇论文讲的是注意力机制：{s}",
    "周五团建，大家{zt}在{zp}集合",
    "有人知道怎么配置nginx吗？",
    "我用的是Win10，可以装吗",
    "这个问题在 github 上有人提过 {s}",
    "我的猫把键盘踩坏了 {e}",
    "今天跑了{num}公里",
    "你最近在看什么书？",
    "这个电影的结局太好哭了 {e}",
    "傻瓜相机现在还有人用吗",
    "考研加油！",
    "明天交作业，今晚通宵",
    "这家咖啡店的拿铁不错",
    "打扰一下，请问会议室在几楼？",
    "群里有人去{zp}吗，拼车",
    "把文件发我邮箱就行",
    "我觉得这个方案可行",
    "周报写完了吗？",
    "他说的是真的吗？发生什么事了",
    "这个表情包太可爱了 {e}",
    "妈妈说晚上回家吃饭",
    "这道题怎么做？{num}",
    "下载链接在这：{s}",
    "今天学了{code}，挺有意思",
    "我去超市买点水果",
    "大家新年快乐 {e}{e}",
    "中秋节快乐，月饼吃了吗",
    "这次旅行去了{zp}，风景很美",
    "{zn}生日快乐！{e}",
    "上海今天{num}度，好热",
    "请大家注意防骗，不要相信中奖通知之类的消息",
    "我今天被一个骗子打电话了，说我中奖了，哈哈",
]

ZH_NAMES = ["小明", "李华", "老王", "张伟", "小红", "阿强", "王老师", "陈经理", "小李", "大刘"]
ZH_PLACES = ["上海", "杭州", "北京", "成都", "公司楼下", "图书馆", "星巴克", "西湖", "地铁站", "食堂", "深圳"]
ZH_TIMES = ["明天上午", "今晚八点", "下午三点", "周五", "下周一", "十分钟后", "中午", "周末"]

MIXED = [
    "{e}",
    "{e}{e}{e}",
    "{num}",
    "@{n}",
    "@{n} {e}",
    "{s}",
    "+1",
    "^",
    "same",
    "?",
    "...",
    "lol {e}",
    "好的 {e} ok",
    "ok 收到 {s}",
    "{n} 说 {t} 见",
]


def compose(rng, template):
    n, n2 = rng.sample(NAMES, 2)
    return template.format(
        n=n, n2=n2, p=rng.choice(PLACES), f=rng.choice(FOODS), c=rng.choice(TOPICS), g=rng.choice(GAMES),
        s=rng.choice(SITES), e=rng.choice(EMOJI), t=rng.choice(TIMES), code=rng.choice(CODE), num=rng.choice(NUMBERS),
        zn=rng.choice(ZH_NAMES), zp=rng.choice(ZH_PLACES), zt=rng.choice(ZH_TIMES))


def decorate(rng, text):
    """Ordinary variation: capitals, trailing punctuation or emoji, a second sentence."""
    r = rng.random()
    if r < 0.08:
        text = text.upper()
    elif r < 0.25 and text[:1].isalpha():
        text = text[0].upper() + text[1:]
    r = rng.random()
    if r < 0.1:
        text += " " + rng.choice(EMOJI)
    elif r < 0.16:
        text += rng.choice(["!", "!!", "?", "...", " :)", " haha", " 哈哈"])
    if rng.random() < 0.1:
        text += " " + compose(rng, rng.choice(EN + ZH))
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=28)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "plugins", "tests", "corpus", "benign.txt"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seen, out = set(), []
    # every template at least once, then a random mix (English ~55 %, Chinese ~35 %, short or mixed ~10 %)
    for t in EN + ZH + MIXED:
        m = compose(rng, t)
        if m not in seen:
            seen.add(m)
            out.append(m)
    attempts = 0
    while len(out) < args.count and attempts < args.count * 50:
        attempts += 1
        r = rng.random()
        pool = EN if r < 0.55 else ZH if r < 0.9 else MIXED
        m = decorate(rng, compose(rng, rng.choice(pool)))
        if m in seen:
            continue
        seen.add(m)
        out.append(m)
    rng.shuffle(out)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("# Generated by scripts/generate-benign-corpus.py (seed %d): ordinary chat, one message a line.\n"
                % args.seed)
        for m in out:
            f.write(m.replace("\n", " ") + "\n")
    print("%d messages -> %s" % (len(out), os.path.relpath(args.out)))


if __name__ == "__main__":
    main()
