//go:build cudaemu

// emu_runtime.cc runs a launch of an emulated kernel: the blocks of the
// grid one after another, the threads of a block as fibers on the calling
// OS thread. A fiber runs until it reaches a barrier or returns; when every
// thread of the block has stopped, the barriers whose threads have all
// arrived are released, and a barrier that can never be (a thread returned
// or waits elsewhere) ends the launch with an error naming the threads.

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emu.h"
#include "emu_api.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

extern "C" {
// The bounds of the section holding every __shared__ variable (the linker
// defines them; weak: absent when no kernel has one).
extern char __start_emu_shared[] __attribute__((weak));
extern char __stop_emu_shared[] __attribute__((weak));
}

namespace emu {

const uint3* thread_idx;
uint3 block_idx;
dim3 block_dim, grid_dim;

namespace {

constexpr size_t kStackBytes = 256 << 10;  // per fiber, with a guard page below
constexpr size_t kMaxShared = 227 << 10;   // an H100's opt-in limit per block

enum State { kReady, kAtSync, kAtWarp, kDone };

struct Fiber {
  uint3 idx;
  int lane;
  State state;
  char* stack;  // kStackBytes, lowest page a guard
#if defined(__x86_64__)
  void* sp;
#else
  ucontext_t ctx;
#endif
  // the warp operation it waits in, and its result
  WarpOp op;
  unsigned mask;
  uint64_t value;
  int arg, width;
  uint64_t result;
};

std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}

// The launch in progress (launches are serialised by launch_mu).
std::mutex launch_mu;
const Entry* g_kernel;
const uint64_t* g_args;
std::vector<Fiber> g_fibers;
Fiber* g_cur;
std::vector<unsigned char> g_dynamic;
std::string g_error;
const Fiber* g_collective;  // the first lane of the warp whose collective runs
#if defined(__x86_64__)
void* g_sched_sp;
#else
ucontext_t g_sched_ctx;
#endif

#if defined(__x86_64__)
// emu_switch saves the callee-saved registers on the current stack, stores
// its pointer in *save, and resumes the stack at next (System V x86-64).
extern "C" void emu_switch(void** save, void* next);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size emu_switch,.-emu_switch
)");
#endif

void fiber_main();

// start prepares f's stack so that the first switch to it enters fiber_main.
void start(Fiber& f) {
#if defined(__x86_64__)
  uintptr_t top = (uintptr_t)(f.stack + kStackBytes) & ~(uintptr_t)15;
  void** sp = (void**)top;
  *--sp = nullptr;                      // fiber_main's return address: it never returns
  *--sp = (void*)&fiber_main;           // where emu_switch's ret goes
  for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12..r15
  f.sp = sp;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, fiber_main, 0);
#endif
}

// resume runs f until it stops at a barrier or returns.
void resume(Fiber& f) {
  g_cur = &f;
  thread_idx = &f.idx;
#if defined(__x86_64__)
  emu_switch(&g_sched_sp, f.sp);
#else
  swapcontext(&g_sched_ctx, &f.ctx);
#endif
}

// stop returns from the running fiber to the scheduler.
void stop(State s) {
  Fiber& f = *g_cur;
  f.state = s;
  asm volatile("" ::: "memory");
#if defined(__x86_64__)
  emu_switch(&f.sp, g_sched_sp);
#else
  swapcontext(&f.ctx, &g_sched_ctx);
#endif
  asm volatile("" ::: "memory");
}

void fiber_main() {
  g_kernel->call(g_kernel->fn, g_args);
  stop(kDone);
  __builtin_unreachable();
}

// The fibers' stacks, kept between launches.
std::vector<char*> g_stacks;

bool ensure_stacks(size_t n) {
  long page = sysconf(_SC_PAGESIZE);
  while (g_stacks.size() < n) {
    void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    mprotect(p, page, PROT_NONE);  // overflowing a fiber's stack faults instead of corrupting another's
    g_stacks.push_back((char*)p);
  }
  return true;
}

std::string describe(const Fiber& f) {
  char buf[64];
  snprintf(buf, sizeof buf, "thread (%u,%u,%u)", f.idx.x, f.idx.y, f.idx.z);
  return buf;
}

std::string block_name() {
  char buf[64];
  snprintf(buf, sizeof buf, "block (%u,%u,%u)", block_idx.x, block_idx.y, block_idx.z);
  return buf;
}

void fail(const std::string& why) {
  if (g_error.empty()) g_error = block_name() + ": " + why;
}

// collective runs the warp-collective operation all 32 lanes of warp wait
// in (see Collective).
void collective(Fiber* warp, int lanes, unsigned mask) {
  if (lanes != 32 || mask != 0xffffffffu) return fail(describe(warp[0]) + ": a warp-collective operation (WMMA) needs all 32 lanes of a full warp");
  Collective* parts[32];
  for (int l = 0; l < 32; l++) {
    parts[l] = reinterpret_cast<Collective*>(warp[l].value);
    if (parts[l]->run != parts[0]->run || strcmp(parts[l]->what, parts[0]->what) != 0)
      return fail(describe(warp[0]) + " waits in " + parts[0]->what + " while " + describe(warp[l]) + " waits in " + parts[l]->what);
  }
  g_collective = &warp[0];
  parts[0]->run(parts);
  g_collective = nullptr;
}

// complete gives every lane of a finished warp operation its result.
void complete(Fiber* warp, int lanes, unsigned mask) {
  const Fiber& first = warp[__builtin_ctz(mask)];
  if (first.op == kCollective) {
    collective(warp, lanes, mask);
    for (int l = 0; l < lanes; l++)
      if (mask >> l & 1) warp[l].state = kReady;
    return;
  }
  uint64_t bits = 0;
  for (int l = 0; l < lanes; l++)
    if ((mask >> l & 1) && warp[l].value) bits |= 1u << l;
  for (int l = 0; l < lanes; l++) {
    if (!(mask >> l & 1)) continue;
    Fiber& f = warp[l];
    int w = f.width, seg = l & ~(w - 1), src = l;
    switch (first.op) {
      case kShflIdx: src = seg + (f.arg & (w - 1)); break;
      case kShflXor: src = l ^ f.arg; if (src >= seg + w) src = l; break;
      case kShflDown: src = l + f.arg; if (src >= seg + w) src = l; break;
      case kShflUp: src = l - f.arg; if (src < seg) src = l; break;
      default: break;
    }
    if (src < 0 || src >= lanes || !(mask >> src & 1)) {
      fail(describe(f) + " reads lane " + std::to_string(src) + ", which is not in the shuffle's mask");
      return;
    }
    switch (first.op) {
      case kSyncWarp: f.result = 0; break;
      case kBallot: f.result = bits; break;
      case kAny: f.result = bits != 0; break;
      case kAll: f.result = bits == (mask & (lanes == 32 ? 0xffffffffu : (1u << lanes) - 1)); break;
      default: f.result = warp[src].value; break;
    }
  }
  for (int l = 0; l < lanes; l++)
    if (mask >> l & 1) warp[l].state = kReady;
}

// try_warp completes the warp operation fiber f waits in if every lane of
// its mask is waiting in the same one; a lane that returned is an error.
void try_warp(Fiber& f) {
  int linear = (int)(&f - g_fibers.data()), base = linear - f.lane;
  int lanes = (int)std::min<size_t>(32, g_fibers.size() - base);
  Fiber* warp = &g_fibers[base];
  if (!(f.mask >> f.lane & 1)) return fail(describe(f) + ": warp operation's mask excludes its own lane");
  if (lanes < 32 && (f.mask >> lanes) != 0)
    return fail(describe(f) + ": warp operation's mask names lanes past the end of the block");
  for (int l = 0; l < lanes; l++) {
    if (!(f.mask >> l & 1)) continue;
    const Fiber& o = warp[l];
    if (o.state == kDone) return fail(describe(f) + " waits in a warp operation for " + describe(o) + ", which returned");
    if (o.state != kAtWarp) return;  // not there yet
    if (o.mask != f.mask || o.op != f.op)
      return fail(describe(f) + " and " + describe(o) + " wait in different warp operations");
  }
  complete(warp, lanes, f.mask);
}

// settle_warp completes the warp operations that fibers lo..hi-1 (one
// warp) all wait in, once the pass has run each of them: one scan per
// operation, not one per lane arriving (which made launches quadratic in
// the warp's width).
void settle_warp(size_t lo, size_t hi) {
  for (size_t i = lo; i < hi && g_error.empty(); i++)
    if (g_fibers[i].state == kAtWarp) try_warp(g_fibers[i]);
}

// run_block runs one block's threads to the end and reports whether they
// finished without a barrier error.
bool run_block() {
  size_t n = g_fibers.size();
  for (size_t i = 0; i < n; i++) {
    g_fibers[i].state = kReady;
    g_fibers[i].stack = g_stacks[i];
    start(g_fibers[i]);
  }
  if (__start_emu_shared != __stop_emu_shared) memset(__start_emu_shared, 0xff, __stop_emu_shared - __start_emu_shared);
  if (!g_dynamic.empty()) memset(g_dynamic.data(), 0xff, g_dynamic.size());
  for (;;) {
    bool ran = false;
    for (size_t i = 0; i < n && g_error.empty(); i++) {
      if (g_fibers[i].state == kReady) {
        ran = true;
        resume(g_fibers[i]);
      }
      if (i % 32 == 31 || i == n - 1) settle_warp(i - i % 32, i + 1);
    }
    if (!g_error.empty()) return false;
    if (ran) continue;
    size_t done = 0, sync = 0;
    for (auto& f : g_fibers) {
      done += f.state == kDone;
      sync += f.state == kAtSync;
    }
    if (done == n) return true;
    if (sync + done == n && done > 0) {
      for (auto& f : g_fibers)
        if (f.state == kDone) {
          fail(std::to_string(sync) + " threads wait in __syncthreads while " + std::to_string(done) + " returned (" + describe(f) + " first)");
          return false;
        }
    }
    if (sync == n) {
      for (auto& f : g_fibers) f.state = kReady;
      continue;
    }
    for (auto& f : g_fibers)
      if (f.state == kAtWarp) {
        fail("deadlock: " + describe(f) + " waits in a warp operation that its lanes never reach (" + std::to_string(sync) + " threads wait in __syncthreads)");
        return false;
      }
    fail("deadlock");
    return false;
  }
}

}  // namespace

void syncthreads() { stop(kAtSync); }

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Fiber& f = *g_cur;
  if (width < 1 || width > 32 || (width & (width - 1))) trap("warp operation width must be a power of two ≤ 32");
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  stop(kAtWarp);
  return g_cur->result;
}

void* dynamic_shared() { return g_dynamic.empty() ? nullptr : g_dynamic.data(); }

size_t dynamic_shared_size() { return g_dynamic.size(); }

void warp_collective(Collective* c) { warp_op(kCollective, 0xffffffffu, reinterpret_cast<uint64_t>(c), 0, 32); }

void collective_fail(const char* why) {
  fail((g_collective ? "warp of " + describe(*g_collective) + ": " : std::string()) + why);
}

void trap(const char* why) {
  fail(describe(*g_cur) + ": " + why);
  stop(kDone);
  __builtin_unreachable();
}

bool register_kernel(const char* name, Entry e) {
  registry()[name] = e;
  return true;
}

}  // namespace emu

using namespace emu;

namespace {

int error(char* err, size_t errlen, const std::string& msg) {
  snprintf(err, errlen, "%s", msg.c_str());
  return 1;
}

}  // namespace

extern "C" int emu_launch(const char* name, const unsigned grid[3], const unsigned block[3], size_t shared,
                          const uint64_t* args, const char* kinds, char* err, size_t errlen) {
  auto it = registry().find(name);
  if (it == registry().end()) return error(err, errlen, std::string("no kernel named ") + name);
  const Entry& k = it->second;
  if (strcmp(k.kinds, kinds) != 0)
    return error(err, errlen, std::string(name) + " takes arguments of kinds \"" + k.kinds + "\", got \"" + kinds + "\"");
  size_t threads = (size_t)block[0] * block[1] * block[2];
  if (threads == 0 || threads > 1024 || grid[0] * grid[1] * grid[2] == 0)
    return error(err, errlen, std::string(name) + ": empty grid or block, or more than 1024 threads a block");
  if (shared > kMaxShared) return error(err, errlen, std::string(name) + ": " + std::to_string(shared) + " bytes of dynamic shared memory, more than a GPU has");
  std::lock_guard<std::mutex> lock(launch_mu);
  if (!ensure_stacks(threads)) return error(err, errlen, "out of memory for fiber stacks");
  g_kernel = &k;
  g_args = args;
  g_error.clear();
  g_dynamic.assign(shared, 0);
  g_fibers.assign(threads, Fiber{});
  for (size_t i = 0; i < threads; i++) {
    g_fibers[i].idx = uint3{(unsigned)(i % block[0]), (unsigned)(i / block[0] % block[1]), (unsigned)(i / (block[0] * block[1]))};
    g_fibers[i].lane = (int)(i % 32);
  }
  grid_dim = dim3{grid[0], grid[1], grid[2]};
  block_dim = dim3{block[0], block[1], block[2]};
  for (unsigned z = 0; z < grid[2]; z++)
    for (unsigned y = 0; y < grid[1]; y++)
      for (unsigned x = 0; x < grid[0]; x++) {
        block_idx = uint3{x, y, z};
        if (!run_block()) return error(err, errlen, std::string(name) + ": " + g_error);
      }
  return 0;
}

extern "C" int emu_kernel_count() { return (int)registry().size(); }

extern "C" const char* emu_kernel_name(int i) {
  auto it = registry().begin();
  std::advance(it, i);
  return it->first.c_str();
}

extern "C" const char* emu_kernel_kinds(int i) {
  auto it = registry().begin();
  std::advance(it, i);
  return it->second.kinds;
}
