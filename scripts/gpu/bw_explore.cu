// Probes: what hand-written kernels reach per level on this GPU (device-memory read, write
// and copy; the L2 read; the L1 and shared-memory reads), over a grid of launch shapes
// (blocks per SM, threads, unroll, load variant). Prints one line per (level, shape) with
// the best of several timed repetitions, then the best per level.
// Backs: the second method for memtopo's bandwidths in docs/results/h100.md and h200.md
// (hand-written: H100 device-memory read 93.3 % of the API peak against memtopo's tuned
// 95.4 %; docs/evidence/2026-11-26-h100-h200-hand-written-bandwidth-kernels/), and why the
// L2 reads use .cg: its .nc "L2" reads of some 29 TB/s are L1 hits.
// Build: nvcc -O3 -arch=sm_90 -o bw bw_explore.cu ; run: ./bw > bw.txt
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

template <int M> __device__ __forceinline__ int4 ld(const int4* p) {
    int4 v;
    if (M == 0) asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else if (M == 1) asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else if (M == 2) asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// Streaming read of n int4 over the grid, `passes` times.
template <int U, int M>
__global__ void rd(const int4* __restrict__ p, size_t n, int passes, int4* sink) {
    int4 a = {0, 0, 0, 0};
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x, s = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; k < passes; ++k) {
        size_t i = t;
        for (; i + (U - 1) * s < n; i += U * s) {
            int4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = ld<M>(p + i + u * s);
#pragma unroll
            for (int u = 0; u < U; ++u) { a.x ^= v[u].x; a.y ^= v[u].y; a.z ^= v[u].z; a.w ^= v[u].w; }
        }
        for (; i < n; i += s) { int4 v = ld<M>(p + i); a.x ^= v.x; a.y ^= v.y; a.z ^= v.z; a.w ^= v.w; }
    }
    if ((a.x & a.y & a.z & a.w) == 0x7fffffff) sink[t] = a;
}

template <int U>
__global__ void wr(int4* __restrict__ p, size_t n) {
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x, s = (size_t)gridDim.x * blockDim.x;
    int4 v = {(int)t, 1, 2, 3};
    size_t i = t;
    for (; i + (U - 1) * s < n; i += U * s) {
#pragma unroll
        for (int u = 0; u < U; ++u) p[i + u * s] = v;
    }
    for (; i < n; i += s) p[i] = v;
}

template <int U>
__global__ void cp(const int4* __restrict__ p, int4* __restrict__ q, size_t n) {
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x, s = (size_t)gridDim.x * blockDim.x;
    size_t i = t;
    for (; i + (U - 1) * s < n; i += U * s) {
        int4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = ld<1>(p + i + u * s);
#pragma unroll
        for (int u = 0; u < U; ++u) q[i + u * s] = v[u];
    }
    for (; i < n; i += s) q[i] = p[i];
}

// Each block re-reads its own `words` int4 region (L1-resident) `passes` times.
template <int U, int M>
__global__ void l1(const int4* __restrict__ p, int words, int passes, int4* sink) {
    const int4* b = p + (size_t)blockIdx.x * words;
    int4 a = {0, 0, 0, 0};
    for (int k = 0; k < passes; ++k) {
        for (int i = threadIdx.x; i < words; i += U * blockDim.x) {
            int4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = ld<M>(b + ((i + u * blockDim.x) & (words - 1)));
#pragma unroll
            for (int u = 0; u < U; ++u) { a.x ^= v[u].x; a.y ^= v[u].y; a.z ^= v[u].z; a.w ^= v[u].w; }
        }
    }
    if ((a.x & a.y & a.z & a.w) == 0x7fffffff) sink[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

template <int U>
__global__ void sh(int words, int passes, int4* sink) {
    extern __shared__ int4 buf[];
    for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = make_int4(i, i + 1, i + 2, i + 3);
    __syncthreads();
    int4 a = {0, 0, 0, 0};
    for (int k = 0; k < passes; ++k) {
        for (int i = threadIdx.x; i < words; i += U * blockDim.x) {
            int4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = buf[(i + u * blockDim.x) & (words - 1)];
#pragma unroll
            for (int u = 0; u < U; ++u) { a.x ^= v[u].x; a.y ^= v[u].y; a.z ^= v[u].z; a.w ^= v[u].w; }
        }
    }
    if ((a.x & a.y & a.z & a.w) == 0x7fffffff) sink[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

__global__ void spin(long long cycles, long long* out) {
    long long s = clock64();
    while (clock64() - s < cycles) {}
    if (threadIdx.x == 0) out[blockIdx.x] = clock64() - s;
}

// Bytes one block's pass really loads (threads past `words` load nothing; the last iteration may overrun and wrap).
static double pass_bytes(int words, int threads, int u) {
    double n = 0;
    for (int t = 0; t < threads && t < words; ++t) n += (words - t + (double)u * threads - 1) / ((double)u * threads) >= 1 ? (double)((words - t + u * threads - 1) / (u * threads)) : 0;
    return n * u * 16;
}
static cudaEvent_t e0, e1;
template <class F> static float best_ms(F f, int reps) {
    f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(e0));
        f();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[0];
}

struct Best { double v = 0; char shape[128] = ""; };
static void keep(Best& b, double v, const char* level, int bps, int th, int u, const char* m, const char* unit) {
    printf("%-10s bps=%2d thr=%4d U=%d %-3s %10.1f %s\n", level, bps, th, u, m, v, unit);
    if (v > b.v) { b.v = v; snprintf(b.shape, sizeof b.shape, "bps=%d thr=%d U=%d %s", bps, th, u, m); }
}

int main() {
    int dev = 0, sms, memclk_khz, busw;
    CK(cudaSetDevice(dev));
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, dev));
    sms = pr.multiProcessorCount;
    CK(cudaDeviceGetAttribute(&memclk_khz, cudaDevAttrMemoryClockRate, dev));
    CK(cudaDeviceGetAttribute(&busw, cudaDevAttrGlobalMemoryBusWidth, dev));
    double peak = 2.0 * memclk_khz * 1e3 * busw / 8;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    long long* cyc;
    CK(cudaMalloc(&cyc, 4096 * 8));
    float ms = best_ms([&] { spin<<<sms, 32>>>(200000000LL, cyc); }, 3);
    double mhz = 200000000.0 / (ms * 1e3);
    printf("%s: %d SMs, mem clock %d kHz, bus %d bit, API peak %.1f GB/s, SM clock %.0f MHz (spin)\n", pr.name, sms, memclk_khz, busw, peak / 1e9, mhz);

    size_t big = 4ull << 30;  // 4 GiB
    int4 *a, *b, *sink;
    CK(cudaMalloc(&a, big));
    CK(cudaMalloc(&b, big));
    CK(cudaMalloc(&sink, 64 << 20));
    CK(cudaMemset(a, 1, big));
    CK(cudaMemset(b, 2, big));
    size_t n = big / 16;
    const char* mn[4] = {"ca", "nc", "cg", "cs"};
    int bpss[] = {1, 2, 4, 8, 16, 32};
    int ths[] = {128, 256, 512, 1024};

    Best dram_r, dram_w, dram_c, l2r, l2w, l1r, shr;
#define RD(U, M) for (int bps : bpss) for (int th : ths) { if (bps * th > 2048) continue; \
        float t = best_ms([&] { rd<U, M><<<sms * bps, th>>>(a, n, 1, sink); }, 5); keep(dram_r, big / (t * 1e6), "dram-read", bps, th, U, mn[M], "GB/s"); }
    RD(1, 0) RD(2, 0) RD(4, 0) RD(8, 0) RD(4, 1) RD(4, 2) RD(4, 3) RD(8, 1) RD(2, 1)
#define WR(U) for (int bps : bpss) for (int th : ths) { if (bps * th > 2048) continue; \
        float t = best_ms([&] { wr<U><<<sms * bps, th>>>(b, n); }, 5); keep(dram_w, big / (t * 1e6), "dram-write", bps, th, U, "st", "GB/s"); }
    WR(1) WR(2) WR(4)
#define CP(U) for (int bps : bpss) for (int th : ths) { if (bps * th > 2048) continue; \
        float t = best_ms([&] { cp<U><<<sms * bps, th>>>(a, b, n / 2); }, 5); keep(dram_c, big / (t * 1e6), "dram-copy", bps, th, U, "nc", "GB/s(r+w)"); }
    CP(1) CP(2) CP(4)
    float tm = best_ms([&] { CK(cudaMemcpyAsync(b, a, big / 2, cudaMemcpyDeviceToDevice)); }, 5);
    printf("cudaMemcpy D2D: %.1f GB/s (read+write)\n", big / (tm * 1e6));

    // L2: a resident buffer read many times.
    for (size_t l2b : {8ull << 20, 20ull << 20, 40ull << 20}) {
        size_t m = l2b / 16;
        int passes = (int)((8ull << 30) / l2b);
        Best bb;
#define L2R(U, M) for (int bps : {2, 4, 8, 16}) for (int th : {256, 512, 1024}) { if (bps * th > 2048) continue; \
        float t = best_ms([&] { rd<U, M><<<sms * bps, th>>>(a, m, passes, sink); }, 3); keep(bb, (double)l2b * passes / (t * 1e6), "l2-read", bps, th, U, mn[M], "GB/s"); }
        L2R(4, 2) L2R(8, 2) L2R(4, 1) L2R(2, 2)
        printf("L2 read of %zu MiB: best %.1f GB/s (%s)\n", l2b >> 20, bb.v, bb.shape);
        if (l2b == (20ull << 20)) l2r = bb;
    }
    // L1: each block re-reads its own region.
    for (int kib : {8, 16, 32}) {
        int words = kib * 1024 / 16;
        Best bb;
#define L1R(U, M) for (int bps : {1, 2, 4, 8}) for (int th : {256, 512, 1024}) { if (bps * th > 2048 || bps * kib > 200) continue; \
        int passes = (int)((256ull << 20) / ((size_t)kib * 1024 * bps)); float t = best_ms([&] { l1<U, M><<<sms * bps, th>>>(a, words, passes, sink); }, 3); \
        double bpc = pass_bytes(words, th, U) * passes * sms * bps / (t * 1e-3) / (mhz * 1e6) / sms; keep(bb, bpc, "l1-read", bps, th, U, mn[M], "B/clk/SM"); }
        L1R(4, 0) L1R(8, 0) L1R(4, 1) L1R(8, 1)
        printf("L1 read of %d KiB per block: best %.2f B/clk/SM (%s)\n", kib, bb.v, bb.shape);
        if (bb.v > l1r.v) l1r = bb;
    }
    // Shared memory.
    for (int kib : {16, 32}) {
        int words = kib * 1024 / 16;
        Best bb;
#define SHR(U) for (int bps : {1, 2, 4}) for (int th : {256, 512, 1024}) { if (bps * th > 2048 || bps * kib > 200) continue; \
        CK(cudaFuncSetAttribute(sh<U>, cudaFuncAttributeMaxDynamicSharedMemorySize, kib * 1024)); \
        int passes = (int)((256ull << 20) / ((size_t)kib * 1024 * bps)); float t = best_ms([&] { sh<U><<<sms * bps, th, kib * 1024>>>(words, passes, sink); }, 3); \
        double bpc = pass_bytes(words, th, U) * passes * sms * bps / (t * 1e-3) / (mhz * 1e6) / sms; keep(bb, bpc, "shared", bps, th, U, "lds", "B/clk/SM"); }
        SHR(4) SHR(8)
        printf("shared read of %d KiB per block: best %.2f B/clk/SM (%s)\n", kib, bb.v, bb.shape);
        if (bb.v > shr.v) shr = bb;
    }
    printf("\nSUMMARY %s (SM clock %.0f MHz by spin, API peak %.1f GB/s)\n", pr.name, mhz, peak / 1e9);
    printf("dram read  %.1f GB/s = %.1f %% of peak (%s)\n", dram_r.v, 100 * dram_r.v * 1e9 / peak, dram_r.shape);
    printf("dram write %.1f GB/s = %.1f %% (%s)\n", dram_w.v, 100 * dram_w.v * 1e9 / peak, dram_w.shape);
    printf("dram copy  %.1f GB/s r+w = %.1f %% (%s)\n", dram_c.v, 100 * dram_c.v * 1e9 / peak, dram_c.shape);
    printf("l2 read 20 MiB %.1f GB/s (%s)\n", l2r.v, l2r.shape);
    printf("l1 read %.2f B/clk/SM = %.1f %% of 128 (%s)\n", l1r.v, 100 * l1r.v / 128, l1r.shape);
    printf("shared  %.2f B/clk/SM = %.1f %% of 128 (%s)\n", shr.v, 100 * shr.v / 128, shr.shape);
    return 0;
}
