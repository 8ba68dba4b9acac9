#pragma once

/// \file
/// Symbol visibility for Alkaid's shared libraries. Everything is built with
/// -fvisibility=hidden; public API is marked ALKAID_EXPORT.

#if defined(ALKAID_STATIC)
#define ALKAID_EXPORT
#define ALKAID_NO_EXPORT
#else
#define ALKAID_EXPORT [[gnu::visibility("default")]]
#define ALKAID_NO_EXPORT [[gnu::visibility("hidden")]]
#endif
