/* The math library: the same straight-line programs the native backend
 * compiles (presk/emit/mathlib.py). Compile with -ffp-contract=off. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifndef PRESK_MATHLIB_HELPERS_F32
#define PRESK_MATHLIB_HELPERS_F32
static inline float presk_pow2_f32(float k) {
    if (!(k >= -126.0f)) k = -126.0f;
    if (k > 127.0f) k = 127.0f;
    uint32_t b = (uint32_t)((int32_t)k + 127) << 23;
    float r; memcpy(&r, &b, 4); return r;
}
static inline float presk_exponent_f32(float x) {
    uint32_t b; memcpy(&b, &x, 4);
    return (float)((int32_t)((b >> 23) & 255u) - 127);
}
static inline float presk_mantissa_f32(float x) {
    uint32_t b; memcpy(&b, &x, 4);
    b = (b & (((uint32_t)1 << 23) - 1)) | ((uint32_t)127 << 23);
    float r; memcpy(&r, &b, 4); return r;
}
#endif

float presk_erf_f32(float x);
float presk_erf_f32(float x) {
    const float v0 = x;
    const float v1 = fabsf(v0);
    const float v2 = v0 * v0;
    const float v3 = 0x1.8000000000000p-1f;
    const int v4 = v1 < v3;
    const float v5 = 0x1.8000000000000p+0f;
    const int v6 = v1 < v5;
    const float v7 = 0x1.2000000000000p+1f;
    const int v8 = v1 < v7;
    const float v9 = 0x1.8000000000000p+1f;
    const int v10 = v1 < v9;
    const float v11 = 0x1.2000000000000p+0f;
    const float v12 = 0x1.e000000000000p+0f;
    const float v13 = 0x1.5000000000000p+1f;
    const float v14 = 0x1.c000000000000p+1f;
    const float v15 = v10 ? v13 : v14;
    const float v16 = v8 ? v12 : v15;
    const float v17 = v6 ? v11 : v16;
    const float v18 = v1 - v17;
    const float v19 = v4 ? v2 : v18;
    const float v20 = 0x0.0p+0f;
    const float v21 = -0x1.73f6200000000p-8f;
    const float v22 = 0x1.5745020000000p-10f;
    const float v23 = 0x0.0p+0f;
    const float v24 = 0x0.0p+0f;
    const float v25 = v10 ? v23 : v24;
    const float v26 = v8 ? v22 : v25;
    const float v27 = v6 ? v21 : v26;
    const float v28 = v4 ? v20 : v27;
    const float v29 = v28 * v19;
    const float v30 = 0x0.0p+0f;
    const float v31 = 0x1.36b22c0000000p-7f;
    const float v32 = -0x1.3b2b3a0000000p-8f;
    const float v33 = 0x1.4e31b60000000p-11f;
    const float v34 = 0x1.147c300000000p-14f;
    const float v35 = v10 ? v33 : v34;
    const float v36 = v8 ? v32 : v35;
    const float v37 = v6 ? v31 : v36;
    const float v38 = v4 ? v30 : v37;
    const float v39 = v29 + v38;
    const float v40 = v39 * v19;
    const float v41 = 0x0.0p+0f;
    const float v42 = 0x1.fbe4680000000p-7f;
    const float v43 = 0x1.0dde6e0000000p-8f;
    const float v44 = -0x1.24b3640000000p-9f;
    const float v45 = -0x1.912cf60000000p-14f;
    const float v46 = v10 ? v44 : v45;
    const float v47 = v8 ? v43 : v46;
    const float v48 = v6 ? v42 : v47;
    const float v49 = v4 ? v41 : v48;
    const float v50 = v40 + v49;
    const float v51 = v50 * v19;
    const float v52 = -0x1.623bf00000000p-11f;
    const float v53 = -0x1.f640a00000000p-5f;
    const float v54 = 0x1.77304c0000000p-7f;
    const float v55 = 0x1.14ac960000000p-8f;
    const float v56 = 0x1.53589a0000000p-14f;
    const float v57 = v10 ? v55 : v56;
    const float v58 = v8 ? v54 : v57;
    const float v59 = v6 ? v53 : v58;
    const float v60 = v4 ? v52 : v59;
    const float v61 = v51 + v60;
    const float v62 = v61 * v19;
    const float v63 = 0x1.4f3d080000000p-8f;
    const float v64 = 0x1.ca56960000000p-6f;
    const float v65 = -0x1.5a326e0000000p-5f;
    const float v66 = -0x1.62eac60000000p-8f;
    const float v67 = -0x1.1024300000000p-14f;
    const float v68 = v10 ? v66 : v67;
    const float v69 = v8 ? v65 : v68;
    const float v70 = v6 ? v64 : v69;
    const float v71 = v4 ? v63 : v70;
    const float v72 = v62 + v71;
    const float v73 = v72 * v19;
    const float v74 = -0x1.b7aaa00000000p-6f;
    const float v75 = 0x1.4cb3880000000p-3f;
    const float v76 = 0x1.143da20000000p-4f;
    const float v77 = 0x1.407dee0000000p-8f;
    const float v78 = 0x1.634eee0000000p-15f;
    const float v79 = v10 ? v77 : v78;
    const float v80 = v8 ? v76 : v79;
    const float v81 = v6 ? v75 : v80;
    const float v82 = v4 ? v74 : v81;
    const float v83 = v73 + v82;
    const float v84 = v83 * v19;
    const float v85 = 0x1.ce2ae20000000p-4f;
    const float v86 = -0x1.6ea6d00000000p-2f;
    const float v87 = -0x1.01a1c60000000p-4f;
    const float v88 = -0x1.8af0020000000p-9f;
    const float v89 = -0x1.3f720a0000000p-16f;
    const float v90 = v10 ? v88 : v89;
    const float v91 = v8 ? v87 : v90;
    const float v92 = v6 ? v86 : v91;
    const float v93 = v4 ? v85 : v92;
    const float v94 = v84 + v93;
    const float v95 = v94 * v19;
    const float v96 = -0x1.81273a0000000p-2f;
    const float v97 = 0x1.45e99c0000000p-2f;
    const float v98 = 0x1.12ceb00000000p-5f;
    const float v99 = 0x1.2ce8a00000000p-10f;
    const float v100 = 0x1.6a51520000000p-18f;
    const float v101 = v10 ? v99 : v100;
    const float v102 = v8 ? v98 : v101;
    const float v103 = v6 ? v97 : v102;
    const float v104 = v4 ? v96 : v103;
    const float v105 = v95 + v104;
    const float v106 = v105 * v19;
    const float v107 = 0x1.06eba80000000p-3f;
    const float v108 = -0x1.c9296c0000000p-4f;
    const float v109 = -0x1.0678440000000p-7f;
    const float v110 = -0x1.aeb45a0000000p-13f;
    const float v111 = -0x1.8e59940000000p-21f;
    const float v112 = v10 ? v110 : v111;
    const float v113 = v8 ? v109 : v112;
    const float v114 = v6 ? v108 : v113;
    const float v115 = v4 ? v107 : v114;
    const float v116 = v106 + v115;
    const float v117 = 0x1.0000000000000p+2f;
    const int v118 = v1 < v117;
    const float v119 = 0x1.0000000000000p+0f;
    const float v120 = v119 + v116;
    const float v121 = 0x1.0000000000000p+0f;
    const float v122 = v118 ? v120 : v121;
    const float v123 = 0x0.0p+0f;
    const int v124 = v0 < v123;
    const float v125 = -v122;
    const float v126 = v124 ? v125 : v122;
    const float v127 = v0 * v116;
    const float v128 = v0 + v127;
    const float v129 = v4 ? v128 : v126;
    const int v130 = v0 != v0;
    const float v131 = v130 ? v0 : v129;
    return v131;
}
