// Probes: which GPC an SM is in, by contention. The SMs of one GPC share its port to the
// crossbar; when the other SMs of a GPC stream L2 hits, an SM of that GPC should see its own
// L2 bandwidth fall and its L2 hit latency rise, while an SM of another GPC should not. This
// program takes candidate groups of SMs (one line each on standard input, SM ids separated by
// spaces; the GPCs of a memtopo run's cluster placement, and the SMs placement left over as a
// group of their own), and for every probe SM and every group, makes the group's SMs (less
// the probe and its TPC mate) stream L2 hits while the probe measures:
//   mode 0: the probe streams too and counts the bytes it read in a fixed window (GB/s);
//   mode 1: one thread of the probe chases 64 L2-resident lines and times each load (median).
// Every run also measures the probe alone (group -1). One block per SM (the opt-in shared
// memory lets no second block in); blocks take their role from their %smid and meet at a
// barrier before the window opens.
// Prints `mode,probe,group,loaders,value,loader_gbps_mean` per run.
// Backs: the second view of memtopo's `gpc-contention` in docs/results/h100.md and h200.md (whole
// GPCs loading, and the left-over SMs loading the placed ones;
// docs/evidence/2026-11-28-h100-h200-gpc-contention/).
//   nvcc -O2 -arch=sm_90 -o gpc_ct scripts/gpu/gpc_contention.cu
//   python3 scripts/gpu/gpc_groups.py memtopo.json | ./gpc_ct > contention.csv
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

constexpr int THREADS = 1024;
constexpr int LAT_SAMPLES = 512;
constexpr uint32_t CHAIN_LINES = 64;

__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint64_t gtime() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory"); return t; }
__device__ __forceinline__ uint32_t clk() { uint32_t t; asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory"); return t; }
__device__ __forceinline__ uint4 ld_cg4(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

struct Args {
  const uint4* buf;          // L2-resident stream buffer
  uint32_t buf_vecs;         // its size in 16 B vectors
  const uint32_t* chain;     // L2-resident chase chain (word offsets)
  uint32_t chain_start;
  const int* role;           // per SM: 0 idle, 1 loader, 2 probe
  int* claimed;              // per SM: a block has taken it
  int* arrived;              // active blocks at the barrier
  int active;                // loaders + probe
  uint64_t warm_ns, meas_ns, tail_ns;
  int mode;
  unsigned long long* vecs;  // per SM: 16 B loads completed in the window
  uint32_t* lat;             // per SM: the probe's latency samples
  uint32_t* lat_n;           // per SM: how many
  int* timeout;              // the barrier timed out
};

__global__ void __launch_bounds__(THREADS) contend(Args a) {
  __shared__ int take;
  __shared__ uint64_t t0;
  __shared__ volatile uint32_t sink;
  const uint32_t sm = smid();
  if (threadIdx.x == 0) take = atomicCAS(&a.claimed[sm], 0, 1) == 0 ? a.role[sm] : 0;
  __syncthreads();
  const int role = take;
  if (role == 0) return;
  if (threadIdx.x == 0) {
    atomicAdd(a.arrived, 1);
    const uint64_t give_up = gtime() + 50000000ull;
    while (*(volatile int*)a.arrived < a.active) {
      if (gtime() > give_up) { atomicExch(a.timeout, 1); break; }
    }
    t0 = gtime();
  }
  __syncthreads();
  const uint64_t open = t0 + a.warm_ns, close = open + a.meas_ns, end = close + a.tail_ns;
  if (role == 2 && a.mode >= 1) {
    if (threadIdx.x != 0) return;
    uint32_t j = a.chain_start, n = 0;
    uint32_t* mine = a.lat + (size_t)sm * LAT_SAMPLES;
    for (;;) {
      const uint32_t c0 = clk();
      j = ld_cg(a.chain + j);
      sink = j;
      const uint32_t c1 = clk();
      const uint64_t now = gtime();
      if (now >= open && now < close && n < LAT_SAMPLES) mine[n++] = c1 - c0;
      if (now >= end) break;
    }
    a.lat_n[sm] = n;
    return;
  }
  // Each warp reads 512 contiguous bytes per load (coalesced); SMs start apart.
  uint32_t idx = (sm * 7919u * 32u + threadIdx.x) % a.buf_vecs;
  uint4 acc = make_uint4(0, 0, 0, 0);
  unsigned long long counted = 0;
  for (;;) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint4 v = ld_cg4(a.buf + idx);
      acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
      idx += THREADS;
      if (idx >= a.buf_vecs) idx -= a.buf_vecs;
    }
    const uint64_t now = gtime();
    if (now >= open && now < close) counted += 8;
    if (now >= end) break;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink = acc.x;
  atomicAdd(&a.vecs[sm], counted);
}

int main() {
  std::vector<std::vector<int>> groups;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream in(line);
    std::vector<int> g;
    for (int s; in >> s;) g.push_back(s);
    if (!g.empty()) groups.push_back(g);
  }
  int sms = 0, smem = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  smem -= 1024;
  CHECK(cudaFuncSetAttribute(contend, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const size_t buf_bytes = 8u << 20;  // 8 MiB: L2-resident
  Args a = {};
  uint4* buf;
  CHECK(cudaMalloc(&buf, buf_bytes));
  CHECK(cudaMemset(buf, 1, buf_bytes));
  a.buf = buf;
  a.buf_vecs = buf_bytes / 16;
  // The chase: CHAIN_LINES random lines of 1 MiB, in random order.
  const size_t chain_words = (1u << 20) / 4;
  std::vector<uint32_t> host(chain_words, 0), lines(chain_words / 32);
  for (size_t i = 0; i < lines.size(); ++i) lines[i] = (uint32_t)i;
  std::mt19937_64 rng(7);
  std::shuffle(lines.begin(), lines.end(), rng);
  for (uint32_t i = 0; i < CHAIN_LINES; ++i) host[lines[i] * 32] = lines[(i + 1) % CHAIN_LINES] * 32;
  uint32_t* chain;
  CHECK(cudaMalloc(&chain, chain_words * 4));
  CHECK(cudaMemcpy(chain, host.data(), chain_words * 4, cudaMemcpyHostToDevice));
  a.chain = chain;
  a.chain_start = lines[0] * 32;
  int *role, *claimed, *arrived, *timeout;
  unsigned long long* vecs;
  uint32_t *lat, *lat_n;
  CHECK(cudaMalloc(&role, sms * 4));
  CHECK(cudaMalloc(&claimed, sms * 4));
  CHECK(cudaMalloc(&arrived, 4));
  CHECK(cudaMalloc(&timeout, 4));
  CHECK(cudaMalloc(&vecs, sms * 8));
  CHECK(cudaMalloc(&lat, (size_t)sms * LAT_SAMPLES * 4));
  CHECK(cudaMalloc(&lat_n, sms * 4));
  a.role = role; a.claimed = claimed; a.arrived = arrived; a.timeout = timeout;
  a.vecs = vecs; a.lat = lat; a.lat_n = lat_n;
  a.warm_ns = 30000; a.meas_ns = 150000; a.tail_ns = 30000;
  std::vector<int> roles(sms);
  std::vector<unsigned long long> got(sms);
  std::vector<uint32_t> samples((size_t)sms * LAT_SAMPLES), counts(sms);
  int timeouts = 0;
  auto run = [&](int mode, int probe, int group) {
    std::fill(roles.begin(), roles.end(), 0);
    int loaders = 0;
    if (group >= 0)
      for (int s : groups[group])
        if (s != probe && s != (probe ^ 1) && s < sms) { roles[s] = 1; ++loaders; }
    roles[probe] = 2;
    a.active = loaders + 1;
    a.mode = mode;
    CHECK(cudaMemcpy(role, roles.data(), sms * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(claimed, 0, sms * 4));
    CHECK(cudaMemset(arrived, 0, 4));
    CHECK(cudaMemset(timeout, 0, 4));
    CHECK(cudaMemset(vecs, 0, sms * 8));
    CHECK(cudaMemset(lat_n, 0, sms * 4));
    contend<<<2 * sms, THREADS, smem>>>(a);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int to = 0;
    CHECK(cudaMemcpy(&to, timeout, 4, cudaMemcpyDeviceToHost));
    timeouts += to;
    CHECK(cudaMemcpy(got.data(), vecs, sms * 8, cudaMemcpyDeviceToHost));
    double loader_sum = 0;
    for (int s = 0; s < sms; ++s)
      if (roles[s] == 1) loader_sum += got[s] * 16.0 / a.meas_ns;
    const double loader_mean = loaders ? loader_sum / loaders : 0;
    double value = 0;
    if (mode == 0) {
      value = got[probe] * 16.0 / a.meas_ns;  // GB/s
    } else {
      CHECK(cudaMemcpy(counts.data(), lat_n, sms * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(samples.data(), lat, samples.size() * 4, cudaMemcpyDeviceToHost));
      const uint32_t n = counts[probe];
      auto at = samples.begin() + (size_t)probe * LAT_SAMPLES;
      if (n) {
        std::nth_element(at, at + n / 2, at + n);
        value = at[n / 2];
      }
    }
    printf("%d,%d,%d,%d,%.2f,%.2f%s\n", mode, probe, group, loaders, value, loader_mean, to ? ",timeout" : "");
  };
  // Warm the buffers into the L2 once.
  for (int s = 0; s < sms; ++s) roles[s] = 0;
  run(0, 0, -1);
  run(1, 0, -1);
  printf("mode,probe,group,loaders,value,loader_gbps_mean\n");
  for (int mode = 0; mode < 2; ++mode)
    for (int probe = 0; probe < sms; ++probe)
      for (int g = -1; g < (int)groups.size(); ++g) run(mode, probe, g);
  // Mode 2: one launch per loading set, every other SM a probe at once. Sets: each group
  // whole (ids 0..), and each group's even-numbered TPCs (id 100 + group), whose odd TPCs
  // then probe beside the rest: members of the loading GPC should stand out.
  printf("mode2,sm,set,loaders,median\n");
  auto run_all = [&](int set, const std::vector<int>& load) {
    std::fill(roles.begin(), roles.end(), 2);
    for (int s : load)
      if (s < sms) roles[s] = 1;
    a.active = sms;
    a.mode = 2;
    CHECK(cudaMemcpy(role, roles.data(), sms * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(claimed, 0, sms * 4));
    CHECK(cudaMemset(arrived, 0, 4));
    CHECK(cudaMemset(timeout, 0, 4));
    CHECK(cudaMemset(vecs, 0, sms * 8));
    CHECK(cudaMemset(lat_n, 0, sms * 4));
    contend<<<2 * sms, THREADS, smem>>>(a);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int to = 0;
    CHECK(cudaMemcpy(&to, timeout, 4, cudaMemcpyDeviceToHost));
    timeouts += to;
    CHECK(cudaMemcpy(counts.data(), lat_n, sms * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(samples.data(), lat, samples.size() * 4, cudaMemcpyDeviceToHost));
    for (int s = 0; s < sms; ++s) {
      if (roles[s] != 2 || !counts[s]) continue;
      auto at = samples.begin() + (size_t)s * LAT_SAMPLES;
      std::nth_element(at, at + counts[s] / 2, at + counts[s]);
      printf("2,%d,%d,%zu,%u\n", s, set, load.size(), at[counts[s] / 2]);
    }
  };
  for (int rep = 0; rep < 2; ++rep) {
    run_all(-1, {});
    for (int g = 0; g < (int)groups.size(); ++g) {
      run_all(g, groups[g]);
      std::vector<int> even;
      for (size_t i = 0; i < groups[g].size(); ++i)
        if ((i / 2) % 2 == 0) even.push_back(groups[g][i]);
      run_all(100 + g, even);
    }
  }
  fprintf(stderr, "%zu groups, %d SMs, %d barrier timeouts\n", groups.size(), sms, timeouts);
  return 0;
}
