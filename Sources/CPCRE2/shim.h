// PCRE2 (Debian's libpcre2-dev) for Swift: the 8-bit library, for the host's bounded text matcher
// (HookRuntime/TextMatcherRegex.swift). pcre2.h selects the code unit width with a macro, so it is set here.
#ifndef HOOKBOT_CPCRE2_SHIM_H
#define HOOKBOT_CPCRE2_SHIM_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

// PCRE2_UNSET and PCRE2_ZERO_TERMINATED are macros of a cast Swift does not import.
static inline size_t hb_pcre2_unset(void) { return PCRE2_UNSET; }
static inline size_t hb_pcre2_zero_terminated(void) { return PCRE2_ZERO_TERMINATED; }

#endif
