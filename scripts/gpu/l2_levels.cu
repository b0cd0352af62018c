// Probes: which latency levels one SM meets on the L2 path, and which SMs share a partition.
// Backs: the per-load level method of memtopo's L2 benchmark (docs/measurement.md, "The L2
// partitions"): its level-finding tests run on samples this probe took on an H100 and an
// H200 (crates/pchase-runner/tests/data/l2-samples-*.txt; l2_levels_analysis.py reads the
// probe's output).
//
// Part L (levels along the size, one SM): a cyclic .cg chase over S bytes, one node per
//   128-byte line, in address order ("seq") or a random permutation of the lines ("rnd");
//   two warm passes, then a pass of which every k-th load is timed (8192 samples).
//   Output rows: L,<order>,<MiB>,<sm>,<sample>,<cycles>,<line index>.
// Part M (the partition map, a second method for the far level): one launch, one block per
//   SM (claimed by %smid). The reference SM warms one 64 KiB array per SM (512 lines), then
//   every SM in turn chases its own array cold (pass 1, every load timed) and again (pass 2).
//   An SM beside the reference finds every line in its own partition; an SM of the other
//   side finds the lines homed on the reference's side in the far partition.
//   Output rows: M,<rep>,<ref>,<sm>,<pass>,<line>,<cycles>.
// Part D (memory reached through each partition): SM 0's array is warmed by an SM of the
//   other side (found by part M); SM 0 reads it cold (far lines known), then the L2 is
//   flushed and SM 0 reads it cold again: memory latency per line, split by its home.
//   Output rows: D,<sm>,<line>,<cold-after-other-warm cycles>,<after-flush cycles>.
//
//   nvcc -O2 -arch=sm_90 -o l2_levels scripts/gpu/l2_levels.cu && ./l2_levels > out.csv
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint32_t clk() { uint32_t c; asm volatile("mov.u32 %0, %%clock;" : "=r"(c) :: "memory"); return c; }
__device__ __forceinline__ uint64_t gtime() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// Part L: the block that claims SM `want` chases; the rest leave.
__global__ void sweep(const uint32_t* chain, uint64_t nodes, uint32_t every, int want, int* claimed,
                      uint32_t* lat, uint32_t* idx, uint32_t* where) {
  __shared__ volatile uint32_t sink;
  uint32_t s = smid();
  if ((int)s != want || threadIdx.x != 0) return;
  if (atomicCAS(claimed, 0, 1) != 0) return;
  *where = s;
  uint32_t j = 0;
  for (uint64_t i = 0; i < 2 * nodes; ++i) j = ld_cg(chain + j);
  uint32_t k = 0;
  for (uint64_t i = 0; i < nodes; ++i) {
    if (i % every == 0 && k < 8192) {
      uint32_t t0 = clk();
      j = ld_cg(chain + j);
      sink = j;
      uint32_t t1 = clk();
      lat[k] = t1 - t0;
      idx[k] = j;
      ++k;
    } else {
      j = ld_cg(chain + j);
    }
  }
  sink = j;
}

// Part M. arrays: nsm arrays of `lines` nodes of 32 words (128 B), each a cyclic chain in
// line order. Every SM's first block claims a slot; the reference warms everything, then
// SMs chase their own array one after another (turn order = SM number).
__global__ void cross_map(const uint32_t* arrays, uint32_t lines, int nsm, int ref, int* claimed,
                          int* arrived, volatile int* turn, volatile int* warmed, uint32_t* out,
                          int* ok) {
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0) return;
  int s = (int)smid();
  if (s >= nsm) return;
  if (atomicCAS(&claimed[s], 0, 1) != 0) return;
  atomicAdd(arrived, 1);
  uint64_t t_start = gtime();
  while (atomicAdd(arrived, 0) < nsm) {
    if (gtime() - t_start > 2000000000ull) { ok[s] = -1; return; }
  }
  const uint32_t words = lines * 32;
  if (s == ref) {
    for (int a = 0; a < nsm; ++a) {
      const uint32_t* c = arrays + (uint64_t)a * words;
      uint32_t j = 0;
      for (uint32_t i = 0; i < 2 * lines; ++i) j = ld_cg(c + j);
      sink = j;
    }
    __threadfence();
    *warmed = 1;
  }
  // Waiters sleep between polls so that 131 SMs polling one line do not load the L2
  // while another SM is being timed.
  while (*warmed == 0) {
    __nanosleep(2000);
    if (gtime() - t_start > 4000000000ull) { ok[s] = -2; return; }
  }
  while (*turn != s) {
    __nanosleep(2000);
    if (gtime() - t_start > 8000000000ull) { ok[s] = -3; return; }
  }
  const uint32_t* c = arrays + (uint64_t)s * words;
  uint32_t j = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < lines; ++i) {
      uint32_t t0 = clk();
      uint32_t n = ld_cg(c + j);
      sink = n;
      uint32_t t1 = clk();
      out[((uint64_t)s * 2 + pass) * lines + j / 32] = t1 - t0;
      j = n;
    }
  }
  ok[s] = 1;
  __threadfence();
  *turn = s + 1;
}

// Part D: one SM (want) chases `lines` lines cold, timing every load.
__global__ void cold_read(const uint32_t* c, uint32_t lines, int want, int* claimed, uint32_t* out,
                          uint32_t* where) {
  __shared__ volatile uint32_t sink;
  uint32_t s = smid();
  if ((int)s != want || threadIdx.x != 0) return;
  if (atomicCAS(claimed, 0, 1) != 0) return;
  *where = s;
  uint32_t j = 0;
  for (uint32_t i = 0; i < lines; ++i) {
    uint32_t t0 = clk();
    uint32_t n = ld_cg(c + j);
    sink = n;
    uint32_t t1 = clk();
    out[j / 32] = t1 - t0;
    j = n;
  }
}

// The other SM warms: every block that is on `want` warms c with two passes.
__global__ void warm_on(const uint32_t* c, uint32_t lines, int want, int* claimed) {
  __shared__ volatile uint32_t sink;
  uint32_t s = smid();
  if ((int)s != want || threadIdx.x != 0) return;
  if (atomicCAS(claimed, 0, 1) != 0) return;
  uint32_t j = 0;
  for (uint32_t i = 0; i < 2 * lines; ++i) j = ld_cg(c + j);
  sink = j;
}

// Part W (a fast capacity sweep): `warps` warps of the block on SM `want`, lane 0 of each,
// chase interleaved parts of one array: warp w follows nodes w, w + warps, w + 2 warps, ...
// (the chain built so), so the lines are used in the same order as by one chase, `warps` at a
// time. Two warm passes, one timed pass; out[w] = cycles of warp w's timed pass.
__global__ void sweep_mlp(const uint32_t* chain, uint64_t nodes, int want, int* claimed,
                          unsigned long long* out, uint32_t* where) {
  __shared__ int mine;
  __shared__ volatile uint32_t sink[32];
  uint32_t s = smid();
  if ((int)s != want) return;
  if (threadIdx.x == 0) mine = atomicCAS(claimed, 0, 1) == 0;
  __syncthreads();
  if (!mine) return;
  uint32_t w = threadIdx.x / 32, warps = blockDim.x / 32;
  if (threadIdx.x % 32 != 0) return;
  if (w == 0) *where = s;
  uint64_t per = nodes / warps;
  uint32_t j = w * 32;
  for (uint64_t i = 0; i < 2 * per; ++i) j = ld_cg(chain + j);
  long long t0 = clock64();
  for (uint64_t i = 0; i < per; ++i) j = ld_cg(chain + j);
  long long t1 = clock64();
  sink[w] = j;
  out[w] = (unsigned long long)(t1 - t0);
}

__global__ void flush(uint32_t* buf, uint64_t words) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
       i += (uint64_t)gridDim.x * blockDim.x)
    buf[i] = (uint32_t)i;
}

static void build_chain(std::vector<uint32_t>& h, uint64_t lines, bool random, std::mt19937_64& rng) {
  h.assign(lines * 32, 0);
  std::vector<uint32_t> order(lines);
  for (uint64_t i = 0; i < lines; ++i) order[i] = (uint32_t)i;
  if (random) std::shuffle(order.begin() + 1, order.end(), rng);
  for (uint64_t i = 0; i < lines; ++i) h[(uint64_t)order[i] * 32] = order[(i + 1) % lines] * 32;
}

int main(int argc, char** argv) {
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  int nsm = prop.multiProcessorCount;
  fprintf(stderr, "%s: %d SMs, L2 %d B\n", prop.name, nsm, prop.l2CacheSize);
  printf("# %s, %d SMs, L2 %d B\n", prop.name, nsm, prop.l2CacheSize);
  std::mt19937_64 rng(12345);
  int *claimed, *arrived, *turn, *warmed, *ok;
  uint32_t *lat, *idx, *where;
  CHECK(cudaMalloc(&claimed, 1024 * sizeof(int)));
  CHECK(cudaMalloc(&arrived, sizeof(int)));
  CHECK(cudaMalloc(&turn, sizeof(int)));
  CHECK(cudaMalloc(&warmed, sizeof(int)));
  CHECK(cudaMalloc(&ok, 1024 * sizeof(int)));
  CHECK(cudaMalloc(&lat, 8192 * 4));
  CHECK(cudaMalloc(&idx, 8192 * 4));
  CHECK(cudaMalloc(&where, 4));
  uint64_t flush_words = 2ull * prop.l2CacheSize;  // 8x L2 bytes / 4
  uint32_t* flushbuf;
  CHECK(cudaMalloc(&flushbuf, flush_words * 4));
  auto do_flush = [&]() { flush<<<prop.multiProcessorCount * 4, 256>>>(flushbuf, flush_words); CHECK(cudaDeviceSynchronize()); };

  // Part L.
  const double sizes_mib[] = {4, 16, 24, 27, 29, 31, 34, 38, 42, 46, 50, 55, 60, 70, 90, 120};
  std::vector<uint32_t> h, hl(8192), hi(8192);
  uint32_t* chain;
  CHECK(cudaMalloc(&chain, 130ull << 20));
  int sm_want = argc > 1 ? atoi(argv[1]) : 0;
  for (int order = 0; order < 2; ++order) {
    for (double mib : sizes_mib) {
      uint64_t lines = (uint64_t)(mib * 1048576.0) / 128;
      build_chain(h, lines, order == 1, rng);
      CHECK(cudaMemcpy(chain, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
      do_flush();
      CHECK(cudaMemset(claimed, 0, 4));
      uint32_t every = (uint32_t)std::max<uint64_t>(1, lines / 8192);
      sweep<<<nsm * 4, 32>>>(chain, lines, every, sm_want, claimed, lat, idx, where);
      CHECK(cudaDeviceSynchronize());
      uint32_t w;
      CHECK(cudaMemcpy(&w, where, 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(hl.data(), lat, 8192 * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(hi.data(), idx, 8192 * 4, cudaMemcpyDeviceToHost));
      uint32_t n = (uint32_t)std::min<uint64_t>(8192, (lines + every - 1) / every);
      std::vector<uint32_t> sorted(hl.begin(), hl.begin() + n);
      std::sort(sorted.begin(), sorted.end());
      fprintf(stderr, "L %s %6.1f MiB sm %u: p5 %u p25 %u p50 %u p75 %u p95 %u\n", order ? "rnd" : "seq", mib, w,
              sorted[n / 20], sorted[n / 4], sorted[n / 2], sorted[3 * n / 4], sorted[19 * n / 20]);
      for (uint32_t k = 0; k < n; ++k)
        printf("L,%s,%.1f,%u,%u,%u,%u\n", order ? "rnd" : "seq", mib, w, k, hl[k], hi[k] / 32);
    }
  }
  // Part W.
  {
    unsigned long long* wout;
    CHECK(cudaMalloc(&wout, 32 * 8));
    for (int warps : {1, 8, 32}) {
      for (double mib = 1.0; mib <= 2.05 * prop.l2CacheSize / 1048576.0; mib *= 1.0905) {
        uint64_t lines = (uint64_t)(mib * 1048576.0) / 128 / warps * warps;
        h.assign(lines * 32, 0);
        // warp w: node w -> w + warps -> ...; the last of each warp's part wraps to its first.
        for (uint64_t i = 0; i < lines; ++i) {
          uint64_t nxt = i + warps < lines ? i + warps : i % warps;
          h[i * 32] = (uint32_t)(nxt * 32);
        }
        CHECK(cudaMemcpy(chain, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        do_flush();
        CHECK(cudaMemset(claimed, 0, 4));
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0); cudaEventCreate(&e1);
        cudaEventRecord(e0);
        sweep_mlp<<<nsm * 4, warps * 32>>>(chain, lines, sm_want, claimed, wout, where);
        cudaEventRecord(e1);
        CHECK(cudaDeviceSynchronize());
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        std::vector<unsigned long long> hw(32);
        CHECK(cudaMemcpy(hw.data(), wout, 32 * 8, cudaMemcpyDeviceToHost));
        double sum = 0; for (int w = 0; w < warps; ++w) sum += hw[w];
        double per = sum / warps / (double)(lines / warps);
        printf("W,%d,%.2f,%.1f,%.3f\n", warps, mib, per, ms);
        fprintf(stderr, "W warps %2d %7.2f MiB: %6.1f cycles/load, %.2f ms\n", warps, mib, per, ms);
      }
    }
  }
  CHECK(cudaFree(chain));

  // Part M.
  const uint32_t lines = 512;
  uint32_t* arrays;
  CHECK(cudaMalloc(&arrays, (uint64_t)nsm * lines * 128));
  std::vector<uint32_t> ha((uint64_t)nsm * lines * 32);
  for (int a = 0; a < nsm; ++a) {
    std::vector<uint32_t> one;
    build_chain(one, lines, false, rng);
    std::copy(one.begin(), one.end(), ha.begin() + (uint64_t)a * lines * 32);
  }
  uint32_t* mout;
  CHECK(cudaMalloc(&mout, (uint64_t)nsm * 2 * lines * 4));
  std::vector<uint32_t> hm((uint64_t)nsm * 2 * lines);
  std::vector<int> hok(nsm);
  auto run_map = [&](int rep, int ref) -> std::vector<double> {
    CHECK(cudaMemcpy(arrays, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
    do_flush();
    CHECK(cudaMemset(claimed, 0, 1024 * sizeof(int)));
    CHECK(cudaMemset(arrived, 0, sizeof(int)));
    CHECK(cudaMemset(turn, 0, sizeof(int)));
    CHECK(cudaMemset(warmed, 0, sizeof(int)));
    CHECK(cudaMemset(ok, 0, 1024 * sizeof(int)));
    CHECK(cudaMemset(mout, 0, (uint64_t)nsm * 2 * lines * 4));
    cross_map<<<nsm * 4, 32>>>(arrays, lines, nsm, ref, claimed, arrived, turn, warmed, mout, ok);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(hm.data(), mout, hm.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hok.data(), ok, nsm * sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<double> frac(nsm, -1);
    for (int s = 0; s < nsm; ++s) {
      if (hok[s] != 1) { fprintf(stderr, "M rep %d ref %d: SM %d not ok (%d)\n", rep, ref, s, hok[s]); continue; }
      std::vector<uint32_t> p2(hm.begin() + ((uint64_t)s * 2 + 1) * lines, hm.begin() + ((uint64_t)s * 2 + 2) * lines);
      std::sort(p2.begin(), p2.end());
      double thr = 1.35 * p2[lines / 2];
      int slow = 0;
      for (uint32_t l = 0; l < lines; ++l) {
        uint32_t c1 = hm[((uint64_t)s * 2) * lines + l];
        if (c1 > thr) ++slow;
        printf("M,%d,%d,%d,1,%u,%u\n", rep, ref, s, l, c1);
        printf("M,%d,%d,%d,2,%u,%u\n", rep, ref, s, l, hm[((uint64_t)s * 2 + 1) * lines + l]);
      }
      frac[s] = (double)slow / lines;
    }
    fprintf(stderr, "M rep %d ref %3d far fraction per SM:", rep, ref);
    for (int s = 0; s < nsm; ++s) fprintf(stderr, " %.2f", frac[s]);
    fprintf(stderr, "\n");
    return frac;
  };
  std::vector<double> f0 = run_map(0, 0);
  int other = -1;
  for (int s = 0; s < nsm; ++s) if (f0[s] > 0.25) { other = s; break; }
  run_map(1, 0);
  if (other >= 0) run_map(2, other);
  run_map(3, nsm / 2);

  // Part D: SM 0's array warmed by `other`, read cold by SM 0, then after a flush.
  if (other >= 0) {
    const uint32_t dl = 4096;  // 512 KiB
    std::vector<uint32_t> hd;
    build_chain(hd, dl, true, rng);
    uint32_t* darr; uint32_t* dout;
    CHECK(cudaMalloc(&darr, (uint64_t)dl * 128));
    CHECK(cudaMalloc(&dout, dl * 4));
    std::vector<uint32_t> far_read(dl), mem_read(dl);
    for (int rep = 0; rep < 2; ++rep) {
      CHECK(cudaMemcpy(darr, hd.data(), hd.size() * 4, cudaMemcpyHostToDevice));
      do_flush();
      CHECK(cudaMemset(claimed, 0, 4));
      warm_on<<<nsm * 4, 32>>>(darr, dl, other, claimed);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemset(claimed, 0, 4));
      cold_read<<<nsm * 4, 32>>>(darr, dl, 0, claimed, dout, where);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(far_read.data(), dout, dl * 4, cudaMemcpyDeviceToHost));
      do_flush();
      CHECK(cudaMemset(claimed, 0, 4));
      cold_read<<<nsm * 4, 32>>>(darr, dl, 0, claimed, dout, where);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(mem_read.data(), dout, dl * 4, cudaMemcpyDeviceToHost));
      for (uint32_t l = 0; l < dl; ++l) printf("D,%d,%d,%u,%u,%u\n", rep, other, l, far_read[l], mem_read[l]);
    }
  }
  fprintf(stderr, "done\n");
  return 0;
}
