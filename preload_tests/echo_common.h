/* echo_common.h — what echo_server.c and its native client echo_client.c agree on.
 *
 * Connection i sends, in round r, ECHO_SIZES[r] bytes whose j-th byte is
 * echo_byte(i, r, j); the server sends every byte back. The client checks each echoed
 * byte against echo_byte and folds the stream of each connection into a hash; the
 * checksum of a run is a function of the connection count alone, so the server can
 * compute it without any I/O (echo_expected_checksum) and compare it with what the
 * client reports.
 */
#ifndef BOBBIN_ECHO_COMMON_H
#define BOBBIN_ECHO_COMMON_H

#include <stddef.h>
#include <stdint.h>

enum { ECHO_ROUNDS = 3 };
static const size_t ECHO_SIZES[ECHO_ROUNDS] = { 64, 1500, 16384 };

static inline uint64_t echo_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline uint8_t echo_byte(long conn, int round, size_t j)
{
    uint64_t w = echo_mix((uint64_t)conn * 0x9e3779b97f4a7c15ull + (uint64_t)round * 1000003u +
                          j / 8);
    return (uint8_t)(w >> (j % 8 * 8));
}

/* FNV-1a over one connection's echoed bytes, round after round */
#define ECHO_FNV_INIT 0xcbf29ce484222325ull
static inline uint64_t echo_fnv(uint64_t h, uint8_t b)
{
    return (h ^ b) * 0x100000001b3ull;
}

/* the checksum of a run: connections' hashes combined independently of order */
static inline uint64_t echo_combine(uint64_t sum, long conn, uint64_t conn_hash)
{
    return sum + echo_mix(conn_hash ^ (uint64_t)conn);
}

static inline uint64_t echo_expected_checksum(long nconns)
{
    uint64_t sum = 0;
    for (long i = 0; i < nconns; i++) {
        uint64_t h = ECHO_FNV_INIT;
        for (int r = 0; r < ECHO_ROUNDS; r++)
            for (size_t j = 0; j < ECHO_SIZES[r]; j++)
                h = echo_fnv(h, echo_byte(i, r, j));
        sum = echo_combine(sum, i, h);
    }
    return sum;
}

static inline uint64_t echo_bytes_per_conn(void)
{
    uint64_t n = 0;
    for (int r = 0; r < ECHO_ROUNDS; r++)
        n += ECHO_SIZES[r];
    return n;
}

#endif
