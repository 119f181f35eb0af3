// libvips for Swift (MediaImaging). Swift cannot call C variadic functions, and libvips' API is made of them
// (options are NULL-terminated name/value lists), so the few calls Hookbot needs are wrapped here as static
// inline functions with fixed arguments. Nothing here keeps state: MediaImaging owns the limits.
#ifndef HOOKBOT_CVIPS_SHIM_H
#define HOOKBOT_CVIPS_SHIM_H

#include <string.h>
#include <vips/vips.h>

// libvips' warnings ("error in tile 0 x 96" as a damaged image is read) would go to stderr; every failure
// they describe reaches the caller as an error already.
static void hb_vips_drop_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user) {
    (void)domain, (void)level, (void)message, (void)user;
}

/// Starts libvips once per process: no operation cache (every file is read once per job and a cache would keep
/// file descriptors and pixels alive), `concurrency` worker threads per job, and every loader blocked except
/// JPEG, PNG, WebP and GIF, so a crafted upload cannot reach the SVG, PDF, TIFF, HEIF, FITS, OpenSlide or
/// ImageMagick loaders. Returns 0 on success.
static inline int hb_vips_start(int concurrency) {
    if (vips_init("hookbot")) return -1;
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO, hb_vips_drop_log, NULL);
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    if (concurrency > 0) vips_concurrency_set(concurrency);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
    vips_operation_block_set("VipsForeignLoadPng", FALSE);
    vips_operation_block_set("VipsForeignLoadWebp", FALSE);
    vips_operation_block_set("VipsForeignLoadNsgif", FALSE);
    return 0;
}

/// The last libvips error as a C string owned by libvips (copy it, then call `hb_vips_clear_error`). The
/// buffer is one per process: with jobs side by side, a reason may carry another job's line too.
static inline const char *hb_vips_error(void) { return vips_error_buffer(); }
static inline void hb_vips_clear_error(void) { vips_error_clear(); }

/// Identifies the loader for a file from its first bytes ("VipsForeignLoadPngFile", …), or NULL (junk).
static inline const char *hb_vips_loader(const char *path) { return vips_foreign_find_load(path); }

/// Reads only the header (no pixel is decoded): width, height of one page, and the number of pages.
/// Returns 0 on success.
static inline int hb_vips_header(const char *path, int *width, int *height, int *pages) {
    VipsImage *image = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (!image) return -1;
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    *pages = vips_image_get_n_pages(image);
    g_object_unref(image);
    return 0;
}

// The time limit: a watchdog thread waits for the job to end, and if the deadline comes first it kills the
// *source* image. Every region the pipeline asks of a killed image fails at once, so a job stops within one
// strip of decoding (libvips' own eval signal fires only between output tiles: a small thumbnail of a huge
// PNG is a single output tile, and would be noticed only when it was already done).
typedef struct {
    GMutex lock;
    GCond cond;
    int done;
    int fired;
    gint64 deadline;
    VipsImage *image;
} hb_vips_watchdog;

static gpointer hb_vips_watch(gpointer data) {
    hb_vips_watchdog *watchdog = data;
    g_mutex_lock(&watchdog->lock);
    while (!watchdog->done) {
        if (!g_cond_wait_until(&watchdog->cond, &watchdog->lock, watchdog->deadline)) {
            if (!watchdog->done) {
                watchdog->fired = 1;
                vips_image_set_kill(watchdog->image, TRUE);
            }
            break;
        }
    }
    g_mutex_unlock(&watchdog->lock);
    return NULL;
}

/// Output formats of `hb_vips_thumbnail`.
enum { HB_VIPS_JPEG = 0, HB_VIPS_PNG = 1, HB_VIPS_WEBP = 2 };

/// Makes a thumbnail of the image in `path` that fits `width` x `height` (never enlarged), or, with `crop`,
/// fills it and cuts the centre; encodes it (`quality` 1-100 for JPEG and WebP, metadata stripped) into a
/// buffer the caller frees with `hb_vips_free`. `shrink` (1, 2, 4 or 8) makes a JPEG decode at that fraction
/// of the size (libjpeg's shrink-on-load: most of the speed of a photo's thumbnail) and a WebP too (libwebp's
/// scaled decode, which also keeps a big WebP from being decoded whole into memory); other formats ignore it.
/// Decoding errors fail the job (VIPS_FAIL_ON_ERROR); past `timeout_us` the job is killed and `*timed_out`
/// set. Returns 0 on success.
static inline int hb_vips_thumbnail(
    const char *path, int is_jpeg, int is_webp, int shrink, int width, int height, int crop, int format, int quality, gint64 timeout_us,
    void **out, size_t *out_length, int *out_width, int *out_height, int *timed_out
) {
    *timed_out = 0;
    VipsImage *source;
    if (is_jpeg && shrink > 1)
        source = vips_image_new_from_file(
            path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, "shrink", shrink, NULL);
    else if (is_webp && shrink > 1)
        source = vips_image_new_from_file(
            path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, "scale", 1.0 / shrink, NULL);
    else
        source = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    if (!source) return -1;
    VipsImage *thumb = NULL;
    if (vips_thumbnail_image(
            source, &thumb, width, "height", height, "size", VIPS_SIZE_DOWN, "crop",
            crop ? VIPS_INTERESTING_CENTRE : VIPS_INTERESTING_NONE, NULL)) {
        g_object_unref(source);
        return -1;
    }
    hb_vips_watchdog watchdog = {.deadline = g_get_monotonic_time() + timeout_us, .image = source};
    g_mutex_init(&watchdog.lock);
    g_cond_init(&watchdog.cond);
    GThread *watcher = g_thread_new("hookbot-thumb-watchdog", hb_vips_watch, &watchdog);
    int result;
    switch (format) {
    case HB_VIPS_PNG:
        result = vips_pngsave_buffer(thumb, out, out_length, "compression", 6, "strip", TRUE, NULL);
        break;
    case HB_VIPS_WEBP:
        result = vips_webpsave_buffer(thumb, out, out_length, "Q", quality, "strip", TRUE, NULL);
        break;
    default:
        result = vips_jpegsave_buffer(thumb, out, out_length, "Q", quality, "strip", TRUE, NULL);
        break;
    }
    g_mutex_lock(&watchdog.lock);
    watchdog.done = 1;
    g_cond_signal(&watchdog.cond);
    g_mutex_unlock(&watchdog.lock);
    g_thread_join(watcher);
    g_mutex_clear(&watchdog.lock);
    g_cond_clear(&watchdog.cond);
    *out_width = vips_image_get_width(thumb);
    *out_height = vips_image_get_height(thumb);
    *timed_out = watchdog.fired;
    g_object_unref(thumb);
    g_object_unref(source);
    return result;
}

static inline void hb_vips_free(void *buffer) { g_free(buffer); }

/// Test fixtures: a `width` x `height` RGB image of noise (so encoders cannot make it trivially small) saved
/// to `path` in the format its suffix names (.png, .jpg, .webp). Returns 0 on success.
static inline int hb_vips_write_noise(const char *path, int width, int height) {
    VipsImage *noise = NULL, *joined = NULL, *pixels = NULL;
    int result = -1;
    if (!vips_gaussnoise(&noise, width, height, "mean", 128.0, "sigma", 40.0, NULL)) {
        VipsImage *bands[3] = {noise, noise, noise};
        if (!vips_bandjoin(bands, &joined, 3, NULL) && !vips_cast(joined, &pixels, VIPS_FORMAT_UCHAR, NULL))
            result = vips_image_write_to_file(pixels, path, NULL);
    }
    if (noise) g_object_unref(noise);
    if (joined) g_object_unref(joined);
    if (pixels) g_object_unref(pixels);
    return result;
}

#endif
