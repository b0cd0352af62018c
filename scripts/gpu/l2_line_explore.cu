// L2 exploration on the H200 (docs/results/h200.md, "The L2 line" and "Beyond"): one
// thread chases .cg chains with one node per 64-byte unit and times 8192 loads.
//  Part 1 (levels): steady state of a cyclic chase over arrays of 8-96 MiB: the share of
//    loads at each latency level, and the per-unit pattern of the first 256 loads.
//  Part 2 (eviction): warm an 8 MiB array A, stream an array B (one load per 128 B),
//    re-time A's first 512 KiB: runs of misses and on which unit multiples they start/end.
//  Part 3 (sparse eviction): warm A of 16-27 MiB (up to the capacity one SM gets), load
//    N nodes of B 33 x 128 B apart (each evicts at most the oldest line of one set),
//    re-time A's first 512 KiB. `./l2_line_explore 3` runs part 3 only.
//   nvcc -O2 -arch=sm_90 -o l2_line_explore scripts/gpu/l2_line_explore.cu && ./l2_line_explore
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); return 1; } } while (0)

constexpr int kTimed = 8192;

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Chains hold element indices of the next node. Warm A for `a_steps`, load B for
// `b_steps`, then time `kTimed` loads of A continuing from where the warm-up ended.
__global__ void probe(const uint32_t* a, uint64_t a_steps, const uint32_t* b, uint64_t b_steps,
                      uint32_t* out) {
  __shared__ uint32_t lat[kTimed];
  __shared__ volatile uint32_t sink;
  uint32_t j = 0;
  for (uint64_t i = 0; i < a_steps; ++i) j = ld_cg(a + j);
  uint32_t k = 0;
  for (uint64_t i = 0; i < b_steps; ++i) k = ld_cg(b + k);
  sink = k;
  for (int t = 0; t < kTimed; ++t) {
    uint32_t t0, t1;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t0) :: "memory");
    j = ld_cg(a + j);
    sink = j;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t1) :: "memory");
    lat[t] = t1 - t0;
  }
  for (int t = 0; t < kTimed; ++t) out[t] = lat[t];
}

static void make_chain(std::vector<uint32_t>& h, size_t bytes, size_t stride) {
  size_t n = bytes / stride, e = stride / 4;
  h.assign(bytes / 4, 0);
  for (size_t i = 0; i < n; ++i) h[i * e] = (uint32_t)(((i + 1) % n) * e);
}

static char level(uint32_t c) { return c < 282 ? '.' : c < 380 ? 'f' : c < 640 ? 'h' : 'M'; }

static void runs(const uint32_t* lat, uint32_t thr, const char* what) {
  int n = 0, len_hist[9] = {0}, al[4] = {0}, slow = 0;
  for (int i = 0; i < kTimed;) {
    if (lat[i] > thr) {
      int s = i;
      while (i < kTimed && lat[i] > thr) ++i;
      if (i == kTimed) break;
      int l = i - s;
      slow += l;
      ++n;
      ++len_hist[l < 8 ? l : 8];
      for (int u = 0; u < 4; ++u) if (s % (1 << u) == 0 && l % (1 << u) == 0) ++al[u];
    } else ++i;
  }
  printf("  %s > %u: %.3f slow, %d runs; lengths 1..7,8+: %d %d %d %d %d %d %d %d; aligned to 1/2/4/8 units: %.2f %.2f %.2f %.2f\n",
         what, thr, slow / (double)kTimed, n, len_hist[1], len_hist[2], len_hist[3], len_hist[4],
         len_hist[5], len_hist[6], len_hist[7], len_hist[8], n ? al[0] / (double)n : 0,
         n ? al[1] / (double)n : 0, n ? al[2] / (double)n : 0, n ? al[3] / (double)n : 0);
}

int main(int argc, char** argv) {
  int only = argc > 1 ? atoi(argv[1]) : 0;
  const size_t stride = 64, max_a = 96ull << 20, max_b = 96ull << 20;
  uint32_t *a, *b, *out;
  CHECK(cudaMalloc(&a, max_a));
  CHECK(cudaMalloc(&b, max_b));
  CHECK(cudaMalloc(&out, kTimed * 4));
  std::vector<uint32_t> h, lat(kTimed);
  if (only == 0 || only == 1) {
  printf("Part 1: steady state of a cyclic chase (2 warm passes), shares of loads <282 / 282-380 / 380-640 / >640 cycles\n");
  const int sizes[] = {8, 16, 20, 24, 26, 28, 30, 32, 36, 40, 48, 56, 64, 80, 96};
  for (int mib : sizes) {
    size_t bytes = (size_t)mib << 20;
    make_chain(h, bytes, stride);
    CHECK(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
    probe<<<1, 1>>>(a, 2 * (bytes / stride), b, 0, out);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(lat.data(), out, kTimed * 4, cudaMemcpyDeviceToHost));
    int c[4] = {0};
    double sum = 0;
    for (uint32_t v : lat) { sum += v; c[v < 282 ? 0 : v < 380 ? 1 : v < 640 ? 2 : 3]++; }
    printf("%3d MiB: mean %6.1f  %.3f %.3f %.3f %.3f\n  ", mib, sum / kTimed, c[0] / (double)kTimed,
           c[1] / (double)kTimed, c[2] / (double)kTimed, c[3] / (double)kTimed);
    for (int i = 0; i < 256; ++i) putchar(level(lat[i]));
    printf("\n");
    runs(lat.data(), 640, "memory");
  }
  }
  if (only == 0 || only == 2) {
  printf("Part 2: A = 8 MiB warmed, B streamed (one load per 128 B), A's first 512 KiB re-timed\n");
  size_t abytes = 8ull << 20;
  make_chain(h, abytes, stride);
  CHECK(cudaMemcpy(a, h.data(), abytes, cudaMemcpyHostToDevice));
  const int bsizes[] = {0, 16, 24, 32, 40, 48, 56, 64, 80, 96};
  for (int mib : bsizes) {
    size_t bbytes = (size_t)(mib ? mib : 1) << 20;
    make_chain(h, bbytes, 128);
    CHECK(cudaMemcpy(b, h.data(), bbytes, cudaMemcpyHostToDevice));
    probe<<<1, 1>>>(a, abytes / stride, b, mib ? bbytes / 128 : 0, out);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(lat.data(), out, kTimed * 4, cudaMemcpyDeviceToHost));
    double sum = 0;
    for (uint32_t v : lat) sum += v;
    printf("B %3d MiB: mean %6.1f\n  ", mib, sum / kTimed);
    for (int i = 0; i < 256; ++i) putchar(level(lat[i]));
    printf("\n");
    runs(lat.data(), 640, "memory");
    runs(lat.data(), 380, "beyond L2 hit");
  }
  }
  if (only == 0 || only == 3) {
  printf("Part 3: A warmed (2 passes), N nodes of B 4224 B apart, A's first 512 KiB re-timed\n");
  const int asizes[] = {16, 20, 24, 26, 27};
  const int ns[] = {0, 256, 1024, 4096, 16384};
  for (int amib : asizes) {
    size_t abytes = (size_t)amib << 20;
    make_chain(h, abytes, stride);
    CHECK(cudaMemcpy(a, h.data(), abytes, cudaMemcpyHostToDevice));
    for (int n : ns) {
      size_t spacing = 33 * 128, bbytes = (size_t)(n ? n : 1) * spacing;
      make_chain(h, bbytes, spacing);
      CHECK(cudaMemcpy(b, h.data(), bbytes, cudaMemcpyHostToDevice));
      probe<<<1, 1>>>(a, 2 * (abytes / stride), b, n, out);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(lat.data(), out, kTimed * 4, cudaMemcpyDeviceToHost));
      printf("A %d MiB, N %5d:\n  ", amib, n);
      for (int i = 0; i < 200; ++i) putchar(level(lat[i]));
      printf("\n");
      runs(lat.data(), 380, "beyond L2 hit");
    }
  }
  }
  return 0;
}
