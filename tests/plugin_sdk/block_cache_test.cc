// BlockCache (plugin_sdk/block_cache.h): blocks recycled per thread, counted
// against the global operator new (common/counting_new.h), which is what
// the cache saves an op's path from calling.
#include "syncline/plugin_sdk/block_cache.h"

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "common/counting_new.h"
#include "gtest/gtest.h"

namespace syncline::backend {
namespace {

using ::syncline::testing::allocations;
using ::syncline::testing::counting;

// Each test its own size, so that no test sees another's cached blocks.
TEST(BlockCache, ABlockFreedIsTheThreadsNextWithoutTheHeap) {
  using Cache = BlockCache<40>;
  void* first = Cache::Allocate();
  Cache::Free(first);
  allocations = 0;
  counting = true;
  for (int i = 0; i < 100; ++i) {
    void* block = Cache::Allocate();
    EXPECT_EQ(block, first);
    static_cast<char*>(block)[39] = static_cast<char>(i);  // all 40 bytes are usable
    Cache::Free(block);
  }
  counting = false;
  EXPECT_EQ(allocations, 0u);
}

TEST(BlockCache, KeepsEightBlocksAndGivesTheRestBack) {
  using Cache = BlockCache<48>;
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(Cache::Allocate());
  EXPECT_EQ(std::set<void*>(blocks.begin(), blocks.end()).size(), 20u);  // all distinct
  for (void* block : blocks) Cache::Free(block);
  blocks.clear();
  allocations = 0;
  counting = true;
  for (int i = 0; i < 20; ++i) blocks.push_back(Cache::Allocate());
  counting = false;
  EXPECT_EQ(allocations, 12u);  // 8 came from the cache
  EXPECT_EQ(std::set<void*>(blocks.begin(), blocks.end()).size(), 20u);
  for (void* block : blocks) Cache::Free(block);
}

TEST(BlockCache, ABlockFreedOnAnotherThreadJoinsThatThreadsCache) {
  using Cache = BlockCache<56>;
  void* made_here = Cache::Allocate();
  void* reused = nullptr;
  std::thread other([&] {
    Cache::Free(made_here);
    reused = Cache::Allocate();  // the block this thread just kept
    Cache::Free(reused);         // kept until the thread ends, then freed
  });
  other.join();
  EXPECT_EQ(reused, made_here);
  // This thread's cache never held it: its next block comes from the heap.
  allocations = 0;
  counting = true;
  void* next = Cache::Allocate();
  counting = false;
  EXPECT_EQ(allocations, 1u);
  Cache::Free(next);
}

// allocate_shared through BlockAllocator: the object and its counts in one
// block, which the next object of the type gets back without the heap.
TEST(BlockAllocator, AnObjectFreedLeavesItsBlockToTheNextWithoutTheHeap) {
  struct Payload {
    Payload(int v, int* destroyed) : value(v), destroyed(destroyed) {}
    ~Payload() { ++*destroyed; }
    int value;
    int* destroyed;
    char pad[100];
  };
  int destroyed = 0;
  const void* first = nullptr;
  {
    auto p = std::allocate_shared<Payload>(BlockAllocator<Payload>(), -1, &destroyed);
    first = p.get();
  }
  EXPECT_EQ(destroyed, 1);
  allocations = 0;
  counting = true;
  for (int i = 0; i < 100; ++i) {
    auto p = std::allocate_shared<Payload>(BlockAllocator<Payload>(), i, &destroyed);
    EXPECT_EQ(p.get(), first);
    EXPECT_EQ(p->value, i);
  }
  counting = false;
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(destroyed, 101);
  // Arrays are the heap's.
  BlockAllocator<Payload> arrays;
  Payload* three = arrays.allocate(3);
  EXPECT_NE(static_cast<const void*>(three), first);
  arrays.deallocate(three, 3);
}

}  // namespace
}  // namespace syncline::backend
