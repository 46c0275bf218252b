// The charts' tick scale ends for every maximum, even a subnormal or non-finite one (a step of
// 0 would loop forever), and keeps its round ticks for ordinary ones. Run: node tests/console/ticks.mjs
import { niceTicks } from "../../assets/console/charts.js";

const cases = [5e-324, 1e-310, 0, -1, NaN, Infinity, -Infinity, 1e308, 7];
let failed = false;
for (const max of cases) {
  const ticks = niceTicks(max);
  const ok = ticks.length >= 2 && ticks.length <= 6 && ticks.every(Number.isFinite) && ticks[0] === 0;
  console.log(`${ok ? "PASS" : "FAIL"} niceTicks(${max}) = ${JSON.stringify(ticks)}`);
  failed ||= !ok;
}
const seven = JSON.stringify(niceTicks(7));
console.log(`${seven === "[0,2,4,6,8]" ? "PASS" : "FAIL"} niceTicks(7) = ${seven}`);
process.exit(failed || seven !== "[0,2,4,6,8]" ? 1 : 0);
